"""Store-clock driving for the non-interactive demo, and the report kill both modes do.

With ``--drain`` the store clock is frozen. Whenever the store has been quiet for a
moment (no live worker holds a running job and nothing changed), the clock is stepped to
the next moment something is due: a scheduled or retryable job's ``run_at``, or the
expiry of a lease held by a dead worker -- or one second, which refills buckets and lets
a dead worker's sweep duty lapse. Backoff, Retry-After and lease expiry then take no
wall-clock time, exactly as every worker process sees the same frozen store clock.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from boson_django import clock, services

from shop.tasks import REPORT_STEPS

QUIET_S = 0.6
STEP_MS = 1_000
PENDING = ("scheduled", "retryable")


class Timekeeper:
    def __init__(self) -> None:
        self.fingerprint: Any = None
        self.quiet_since = time.monotonic()
        self.steps = 0

    def start(self) -> None:
        clock.freeze()

    def stop(self) -> None:
        clock.unfreeze()

    def tick(self, jobs: dict[str, Any], alive: set[str]) -> int | None:
        """Step the frozen clock when the store is quiet; returns the step in ms, if any."""
        live = [j for j in jobs.values() if j.state == "running" and j.lease_holder in alive]
        fingerprint = sorted((j.id, j.state, j.attempt, j.crash_attempt, j.fence) for j in jobs.values())
        if live or fingerprint != self.fingerprint:
            self.fingerprint, self.quiet_since = fingerprint, time.monotonic()
            return None
        if time.monotonic() - self.quiet_since < QUIET_S:
            return None
        step = self.next_step_ms(jobs, alive, clock.now())
        clock.advance(step)
        self.steps += 1
        self.quiet_since = time.monotonic()
        return step

    @staticmethod
    def next_step_ms(jobs: dict[str, Any], alive: set[str], now: datetime) -> int:
        due = [j.run_at for j in jobs.values() if j.state in PENDING]
        due += [j.lease_expires_at for j in jobs.values()
                if j.state == "running" and j.lease_holder not in alive and j.lease_expires_at]
        later = [(at - now).total_seconds() * 1000 for at in due if at > now]
        return int(min(later)) + 1 if later else STEP_MS


class ReportKiller:
    """Once the report is a third done, SIGKILL the worker running it (once), so the
    next attempt visibly resumes from its checkpoint."""

    def __init__(self, report_id: str, supervisor: Any):
        self.report_id = report_id
        self.supervisor = supervisor
        self.done = False

    def tick(self, jobs: dict[str, Any]) -> None:
        job = jobs.get(self.report_id)
        if self.done or job is None or job.state != "running":
            return
        progress = services.get_progress(self.report_id)
        if progress is not None and progress.current >= REPORT_STEPS // 3:
            why = f"report at step {int(progress.current)}/{REPORT_STEPS}; it will resume from its checkpoint"
            self.done = self.supervisor.kill(job.lease_holder, why)
