"""What an ack does to a running job, decided once for every engine.

:func:`decide` is pure: the outcome, the job's row and the store time in, the job's next
state and dates out. The ORM path (:func:`boson_django.services.acks.apply`) and the
drivers' batched statements write what it decides; PostgreSQL's plain-success statement
(:mod:`boson_django.drivers.postgresql.acks`) is the same decision for SUCCESS written
in SQL (attempt + 1, finalized now, expiring after the retention).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from boson_django import conf, policies
from boson_django.states import ATTEMPT_SPENDING, DELETED, JobState, Outcome, require

_rng = random.Random()


class Decision(NamedTuple):
    """A running job's next state (None: its row is deleted), the attempts it has spent,
    and its dates: ``run_at`` (None: unchanged), ``finalized_at`` and ``expires_at``
    (None unless the job finishes)."""

    state: JobState | None
    attempt: int
    run_at: datetime | None = None
    finalized_at: datetime | None = None
    expires_at: datetime | None = None


def decide(outcome: Outcome, job: Any, now: datetime, delay_ms: int | None = None) -> Decision:
    """The transition of running ``job`` (a row with ``attempt``, ``retention_ms`` and,
    for RETRY, ``max_attempts``) acked with ``outcome`` at store time ``now``.

    ``delay_ms``: the ack's delay (SNOOZE, RATE_LIMITED, RETRY; a RETRY without one backs
    off). Raises ``IllegalTransition`` for an outcome the transition table does not allow
    from ``running`` (LEASE_LOST: the reclaimer records it)."""
    spent = job.attempt + (1 if outcome in ATTEMPT_SPENDING else 0)
    decision = _decide(outcome, job, spent, now, delay_ms)
    require(JobState.RUNNING, outcome, decision.state)
    return decision


def _decide(outcome: Outcome, job: Any, spent: int, now: datetime, delay_ms: int | None) -> Decision:
    if outcome is Outcome.SUCCESS:
        return Decision(DELETED, spent) if job.retention_ms == 0 else finished(JobState.COMPLETED, job, spent, now)
    if outcome is Outcome.RETRY:
        if policies.gives_up(spent, job.max_attempts):
            return finished(JobState.FAILED, job, spent, now)
        settings = conf.get()
        wait = delay_ms if delay_ms is not None else policies.backoff_ms(spent, settings.RETRY_BASE_MS, settings.RETRY_CAP_MS, _rng)
        return Decision(JobState.RETRYABLE, spent, run_at=now + timedelta(milliseconds=wait))
    if outcome in (Outcome.SNOOZE, Outcome.RATE_LIMITED):
        return Decision(JobState.SCHEDULED, spent, run_at=now + timedelta(milliseconds=delay_ms or 0))
    if outcome is Outcome.SKIP:
        return finished(JobState.SKIPPED, job, spent, now)
    if outcome in (Outcome.UNDECODABLE, Outcome.DISCARD):
        return finished(JobState.FAILED, job, spent, now)
    if outcome is Outcome.REVOKE:
        return Decision(DELETED, spent)
    return Decision(JobState.RUNNING, spent)  # not an ack's outcome: require() refuses it


def finished(state: JobState, job: Any, attempt: int, now: datetime) -> Decision:
    """A terminal ``state`` reached at ``now``: expires after the job's retention."""
    return Decision(state, attempt, finalized_at=now, expires_at=expiry(job, now))


def expiry(job: Any, now: datetime) -> datetime:
    """When a job finished at ``now`` may be evicted: after its retention, or the store's."""
    keep = job.retention_ms if job.retention_ms is not None else conf.get().RETENTION_MS
    return now + timedelta(milliseconds=keep)
