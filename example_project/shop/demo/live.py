"""The interactive demo: a trickle of the shop's jobs and a view of the store, until Ctrl-C.

On a terminal the view is redrawn twice a second: jobs per queue and state, the running
jobs with their progress, recent events. When stdout is not a terminal (a log, a pipe,
CI), it says once what runs and what the demo does, then writes events as they happen
and a line of counts every few seconds.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any

from shop.demo import display
from shop.demo.supervisor import WORKERS, Supervisor
from shop.demo.timekeeper import ReportKiller
from shop.demo.trickle import Trickle

QUEUES = sorted({queue for spec in WORKERS for queue in spec.queues})
#: Paused when the live demo starts, for the operator to resume from the admin.
PAUSED_AT_START = "reports"
FRAME_S = 0.5
SUMMARY_EVERY_S = 5.0


def header(store: str, url: str, password: str) -> list[str]:
    return [
        f"boson_django demo -- store: {store}",
        f"admin: {url}   login: admin / {password}",
        "A few of the shop's jobs a second, until Ctrl-C (which stops the workers and the server).",
        f'Queue "{PAUSED_AT_START}" starts paused: resume it in the admin (Queues) to run the sales reports.',
    ]


def explanation() -> list[str]:
    """What the plain-log mode says once, after the header."""
    workers = "; ".join(f"{spec.name} ({', '.join(spec.queues)})" for spec in WORKERS)
    return [
        "stdout is not a terminal: this is the demo's log mode (events as they happen, counts every "
        f"{SUMMARY_EVERY_S:g} s).",
        f"running: the development server and {len(WORKERS)} worker processes: {workers}.",
        "the admin shows, within a minute: thumbnails running with progress; bounced emails and orders "
        "the partner never takes under Failed jobs; partner syncs retrying and follow-up emails "
        "scheduled; a supplier feed that kills its worker under Quarantined jobs; the paused queue.",
    ]


class Watch:
    """Turns what changed between two looks into events: more jobs failed for good or
    quarantined, a queue paused or resumed."""

    def __init__(self) -> None:
        self.last: display.Look | None = None

    def events(self, seen: display.Look) -> list[str]:
        last, self.last = self.last, seen
        if last is None:
            return []
        found = []
        for state, page in (("failed", "Failed jobs"), ("quarantined", "Quarantined jobs")):
            more = seen.total(state) - last.total(state)
            if more > 0:
                found.append(f"{more} more job{'s' * (more > 1)} {state} ({seen.total(state)} in all): admin > {page}")
        found += [f'queue "{q}" resumed: its jobs run now' for q in last.paused if q not in seen.paused]
        found += [f'queue "{q}" paused' for q in seen.paused if q not in last.paused]
        return found


def run(write: Callable[[str], Any], supervisor: Supervisor, report_id: str, head: list[str], *,
        tty: bool, stop_after: float | None = None) -> None:
    """Trickle jobs and show the store until Ctrl-C (KeyboardInterrupt), or for
    ``stop_after`` seconds."""
    trickle, watch = Trickle(), Watch()
    killer = ReportKiller(report_id, supervisor)
    started = last_summary = time.monotonic()
    shown = 0
    if not tty:
        write("\n".join([*head, *explanation()]))
    while stop_after is None or time.monotonic() - started < stop_after:
        supervisor.restart_dead()
        elapsed = time.monotonic() - started
        trickle.pour(elapsed)
        seen = display.look(QUEUES)
        killer.tick(seen.running)
        supervisor.events.extend(watch.events(seen))
        footer = f"{trickle.enqueued} jobs trickled in {elapsed:.0f} s (about {trickle.enqueued / max(elapsed, 1):.1f} a second)"
        if tty:
            rows = shutil.get_terminal_size().lines
            write(display.CLEAR + display.live_frame(head, seen, supervisor.events, footer, rows))
        else:
            for event in supervisor.events[shown:]:
                write(f"  {event}")
            shown = len(supervisor.events)
            if time.monotonic() - last_summary >= SUMMARY_EVERY_S:
                last_summary = time.monotonic()
                write(f"[{elapsed:5.0f} s] trickled {trickle.enqueued} | {display.summary(seen)}")
        time.sleep(FRAME_S)
    write(f"stopping after {stop_after:g} s (--timeout)")
