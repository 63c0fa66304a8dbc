"""The demo's views: jobs per queue and state, the running jobs' progress, recent events.

``--drain`` shows every job it enqueued (a finite set) with a progress bar; the live
demo, whose trickle never ends, reads counts per queue and the running jobs only
(:func:`look`), so a frame costs the same after an hour as after a minute.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from boson_django import services
from boson_django.models import Queue

STATES = ["scheduled", "available", "running", "retryable", "completed", "failed", "quarantined"]
SHORT = {"scheduled": "sched", "available": "avail", "retryable": "retry", "quarantined": "quarant"}
#: States a job does not leave by itself.
SETTLED = {"completed", "skipped", "failed", "cancelled", "quarantined"}
CLEAR = "\x1b[H\x1b[2J"
#: States as the live demo's log line says them.
SAID = {"available": "waiting", "retryable": "retrying"}
#: Running jobs listed with their progress, at most (the demo's workers run 10 at once).
RUNNING_SHOWN = 10


def settled(jobs: dict[str, Any]) -> int:
    return sum(1 for job in jobs.values() if job.state in SETTLED)


def bar(done: int, total: int, width: int = 30) -> str:
    filled = width if total == 0 else round(width * done / total)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} jobs settled"


def table(jobs: dict[str, Any]) -> list[str]:
    grid: dict[str, Counter[str]] = {}
    for job in jobs.values():
        grid.setdefault(job.queue, Counter())[job.state] += 1
    return grid_lines(grid)


def grid_lines(grid: dict[str, Any]) -> list[str]:
    """One line per queue, one column per state of ``STATES``."""
    lines = ["queue".ljust(12) + "".join(SHORT.get(s, s).rjust(11) for s in STATES)]
    for queue in sorted(grid):
        lines.append(queue.ljust(12) + "".join(str(grid[queue].get(s) or "-").rjust(11) for s in STATES))
    return lines


def frame(header: list[str], jobs: dict[str, Any], events: list[str], footer: str = "") -> str:
    lines = [*header, "", *table(jobs), "", bar(settled(jobs), len(jobs))]
    if events:
        lines += ["", "events:", *(f"  {e}" for e in events[-8:])]
    if footer:
        lines += ["", footer]
    return "\n".join(lines)


# -- the live demo ------------------------------------------------------------------------

@dataclass
class Look:
    """What the store holds now: counts per queue and state, the running jobs (with their
    progress, where they report one), the paused queues."""

    grid: dict[str, dict[str, int]]
    running: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)
    paused: list[str] = field(default_factory=list)

    def total(self, state: str) -> int:
        return sum(counts.get(state, 0) for counts in self.grid.values())


def look(queues: list[str]) -> Look:
    running = {job.id: job for job in services.list_jobs(state="running", limit=100)}
    return Look(
        grid={queue: services.counts(queue) for queue in queues},
        running=running,
        progress={job_id: services.get_progress(job_id) for job_id in running},
        paused=sorted(Queue.objects.filter(paused=True).values_list("name", flat=True)),
    )


def running_lines(seen: Look, most: int = RUNNING_SHOWN) -> list[str]:
    """One line per running job (``most`` at most): its task, queue, worker, and its
    progress if it reports one."""
    lines = []
    for job in list(seen.running.values())[:most]:
        progress = seen.progress.get(job.id)
        line = f"{_task_name(job.task):<22}{job.queue:<12}{job.lease_holder or '':<14}"
        if progress is not None and progress.total:
            line += f"{_mini_bar(progress.current, progress.total)} {progress.message}"
        lines.append(line.rstrip())
    return lines or ["(none this instant)"]


def live_frame(header: list[str], seen: Look, events: list[str], footer: str, rows: int = 50) -> str:
    """The live demo's screen, cut to ``rows`` lines: the header (the admin's address and
    login) and the counts always fit; the running jobs and the latest events share the rest."""
    top = [*header, "", *grid_lines(seen.grid), "", "running now:"]
    spare = max(2, rows - len(top) - 5)  # 5: a blank, "events:", a blank, the footer, the cursor
    running = running_lines(seen, most=max(1, min(RUNNING_SHOWN, spare // 2)))
    shown = events[-(spare - len(running)):] if spare > len(running) else []
    lines = [*top, *(f"  {line}" for line in running)]
    if shown:
        lines += ["", "events:", *(f"  {e}" for e in shown)]
    return "\n".join([*lines, "", footer])


def summary(seen: Look) -> str:
    """The live demo's one-line state of the store, for a log."""
    parts = [f"{SAID.get(state, state)} {seen.total(state)}"
             for state in ("running", "available", "scheduled", "retryable", "failed", "quarantined", "completed")]
    parts.append(f"paused: {', '.join(seen.paused) or 'none'}")
    shown = [f"{_task_name(seen.running[job_id].task)} {p.current:g}/{p.total:g}"
             for job_id, p in seen.progress.items() if p is not None and p.total][:3]
    if shown:
        parts.append("progress: " + ", ".join(shown))
    return " | ".join(parts)


def _task_name(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def _mini_bar(current: float, total: float, width: int = 12) -> str:
    filled = max(0, min(width, round(width * current / total)))
    return f"[{'#' * filled}{'.' * (width - filled)}] {current:g}/{total:g}"
