"""The demo's terminal view: jobs per queue and state, a progress bar, recent events."""

from __future__ import annotations

from collections import Counter
from typing import Any

STATES = ["scheduled", "available", "running", "retryable", "completed", "failed", "quarantined"]
SHORT = {"scheduled": "sched", "available": "avail", "retryable": "retry", "quarantined": "quarant"}
#: States a job does not leave by itself.
SETTLED = {"completed", "skipped", "failed", "cancelled", "quarantined"}
CLEAR = "\x1b[H\x1b[2J"


def settled(jobs: dict[str, Any]) -> int:
    return sum(1 for job in jobs.values() if job.state in SETTLED)


def bar(done: int, total: int, width: int = 30) -> str:
    filled = width if total == 0 else round(width * done / total)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} jobs settled"


def table(jobs: dict[str, Any]) -> list[str]:
    grid: dict[str, Counter[str]] = {}
    for job in jobs.values():
        grid.setdefault(job.queue, Counter())[job.state] += 1
    lines = ["queue".ljust(12) + "".join(SHORT.get(s, s).rjust(11) for s in STATES)]
    for queue in sorted(grid):
        lines.append(queue.ljust(12) + "".join(str(grid[queue][s] or "-").rjust(11) for s in STATES))
    return lines


def frame(header: list[str], jobs: dict[str, Any], events: list[str], footer: str = "") -> str:
    lines = [*header, "", *table(jobs), "", bar(settled(jobs), len(jobs))]
    if events:
        lines += ["", "events:", *(f"  {e}" for e in events[-8:])]
    if footer:
        lines += ["", footer]
    return "\n".join(lines)
