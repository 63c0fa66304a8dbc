"""An ack's parts: its validation (:func:`check`) and the transition of one held, locked
job (:func:`apply`), as :func:`boson_django.services.decide.decide` decides it.

The entry points, :func:`~boson_django.services.ack` and
:func:`~boson_django.services.ack_many`, are in :mod:`.ack_batch`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from boson_django import conf, database, drivers, transitions, validation
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job, JobData
from boson_django.services import buckets, decide, history, leases, throughput
from boson_django.states import RECORDED_OUTCOMES, JobState, Outcome


def _as_outcome(outcome: Any) -> Outcome:
    try:
        parsed = outcome if isinstance(outcome, Outcome) else Outcome(str(outcome).lower())
    except ValueError:
        raise InvalidEnvelope("outcome", f"unknown outcome {outcome!r}") from None
    if parsed is Outcome.LEASE_LOST:
        raise InvalidEnvelope("outcome", "LEASE_LOST is never acked: the reclaimer records it")
    return parsed


@dataclass(frozen=True)
class Checked:
    """An ack's arguments, validated (what :func:`check` returns)."""

    outcome: Outcome
    delay: int | None
    weight: float | None
    logs: Sequence[str]
    result: Any
    error: str | None


_PLAIN_SUCCESS = Checked(Outcome.SUCCESS, None, None, (), None, None)


def check(
    outcome: Any, error: Any, delay_ms: Any, logs: Any, actual_weight: Any, result: Any
) -> Checked:
    """Validate an ack's arguments; ``InvalidEnvelope`` names the bad one."""
    if (outcome is Outcome.SUCCESS and error is None and delay_ms is None and actual_weight is None
            and result is None and not logs and isinstance(logs, (list, tuple))):
        return _PLAIN_SUCCESS  # a worker's most common ack: nothing in it to check
    parsed = _as_outcome(outcome)
    delay = validation.delay(delay_ms, required_positive=parsed is Outcome.SNOOZE)
    weight = None if actual_weight is None else validation.amount(actual_weight, "actual_weight")
    if not isinstance(logs, (list, tuple)) or not all(isinstance(x, str) for x in logs):
        raise InvalidEnvelope("logs", "must be a sequence of strings")
    if result is not None:
        validation.stored_json(result, "result")
    if error is not None and not isinstance(error, str):
        raise InvalidEnvelope("error", f"must be a string, got {type(error).__name__}")
    error = None if error is None else validation.clipped(validation.storable_text(error), validation.MAX_ERROR_CHARS)
    return Checked(parsed, delay, weight, logs, result, error)


class Shared:
    """What the acks of one transaction share and write once, after the last of them:
    the finished attempts' counter rows (:class:`throughput.Tally`) and the rate-class
    buckets they correct or read (:class:`buckets.Buckets`: one lock and one save per
    bucket, however many acks touch it)."""

    def __init__(self, using: str, now: datetime) -> None:
        self.tally = throughput.Tally()
        self.buckets = buckets.Buckets(using, now)

    def lock_buckets(self, acked: Iterable[tuple[Job, Checked]]) -> None:
        """Lock, in name order, every bucket these acks will correct or read. Locked ack
        by ack, in request order, two flushes touching the same buckets in a different
        order could deadlock."""
        self.buckets.load({
            job.rate_class for job, ok in acked
            if job.rate_class and (ok.weight is not None or ok.outcome is Outcome.RATE_LIMITED)
        })

    def write(self) -> None:
        self.buckets.save()
        self.tally.write(self.buckets.now, self.buckets.using)


def apply(job: Job, ok: Checked, now: datetime, using: str, shared: Shared) -> str | None:
    """Write the transition of a held, locked job (the caller checked the lease); its
    bucket correction and finished attempt go into ``shared``, which the caller writes
    once its acks are applied. Returns the new state (None: the row was deleted)."""
    job.charged_weight = shared.buckets.reconcile(job.rate_class, job.charged_weight, ok.weight)
    delay = ok.delay
    if delay is None and ok.outcome is Outcome.RATE_LIMITED:
        delay = _bucket_wait(job, shared.buckets)
    decision = decide.decide(ok.outcome, job, now, delay)
    shared.tally.finish(job, ok.outcome, decision.attempt, now)
    if decision.state is None:
        delete_jobs([job.id], using)  # its runs and data go with the row
    else:
        _close(job, ok.outcome, ok.error or "", ok.logs, now, using)
        if ok.result is not None and decision.state is JobState.COMPLETED:
            leases.put_data(job, JobData.Kind.RESULT, ok.result, now, using)
        _save(job, decision, ok.error)
    transitions.acked([(job, ok.outcome, decision.state)], now, using)
    return None if decision.state is None else decision.state.value


def _save(job: Job, decision: decide.Decision, error: str | None) -> None:
    job.state = decision.state.value if decision.state is not None else job.state
    job.attempt = decision.attempt
    job.lease_holder = None
    job.lease_expires_at = None
    if decision.run_at is not None:
        job.run_at = decision.run_at
    if decision.finalized_at is not None:
        job.finalized_at, job.expires_at = decision.finalized_at, decision.expires_at
    if error:
        job.last_error = error
    job.save(update_fields=[
        "state", "attempt", "lease_holder", "lease_expires_at", "run_at", "finalized_at",
        "expires_at", "charged_weight", "last_error",
    ])


def _bucket_wait(job: Job, held: buckets.Buckets) -> int:
    """A RATE_LIMITED ack's delay when it gave none: until the job's bucket holds its
    weight again (at most the longest delay an ack may give: a bucket deep in debt is
    full again past any date), or the base backoff if the class has no bucket."""
    wait = held.ms_until(job.rate_class, max(job.weight, 1.0))
    return conf.get().RETRY_BASE_MS if wait is None else min(max(wait, 1), validation.MAX_MS)


def _close(job: Job, outcome: Outcome, error: str, logs: Sequence[str], now: datetime, using: str) -> None:
    recorded = outcome in RECORDED_OUTCOMES or (outcome is Outcome.SUCCESS and bool(logs))
    history.close_run(job.id, job.fence, outcome=outcome.value, error=error, logs=logs, recorded=recorded, now=now, using=using)


def delete_jobs(job_ids: Sequence[str], using: str) -> int:
    """Delete jobs with their runs and side data, whatever their state (the caller decided)."""
    return drivers.for_alias(using).delete_jobs(database.conn(using), job_ids)
