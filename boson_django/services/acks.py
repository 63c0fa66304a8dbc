"""ack: close a running job with the handler's outcome. One function per transition."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from boson_django import clock, conf, policies, transitions, validation
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job, JobData
from boson_django import database
from boson_django.services import buckets, history, leases, throughput
from boson_django.states import ATTEMPT_SPENDING, RECORDED_OUTCOMES, JobState, Outcome, ends_in

_rng = random.Random()


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


@database.store_transaction
def ack(
    lease: Any,
    outcome: Outcome | str,
    *,
    error: str | None = None,
    delay_ms: int | float | None = None,
    logs: Sequence[str] = (),
    actual_weight: float | None = None,
    result: Any = None,
    using: str | None = None,
) -> str | None:
    """Apply the handler's outcome to a running job; returns the new state (None: deleted).

    Locks the job row; accepts only a held lease (``running``, same fence, unexpired),
    otherwise raises ``LeaseRejected`` and writes nothing. ``actual_weight`` corrects the
    admission charge in the same transaction. Not idempotent: a second ack of the same
    lease is rejected, because the first one ended it. Many acks at once:
    :func:`boson_django.services.ack_many`.
    """
    checked = check(outcome, error, delay_ms, logs, actual_weight, result)
    assert using is not None
    now = clock.now(using)
    shared = Shared(using, now)
    state = apply(leases.hold(lease, now, using), checked, now, using, shared)
    shared.write()
    return state


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
    """The transition of a held, locked job (the caller checked the lease); its bucket
    correction and finished attempt go into ``shared``, which the caller writes once its
    acks are applied."""
    job.charged_weight = shared.buckets.reconcile(job.rate_class, job.charged_weight, ok.weight)
    spent = job.attempt + (1 if ok.outcome in ATTEMPT_SPENDING else 0)
    shared.tally.finish(job, ok.outcome, spent, now)
    delay = ok.delay
    if delay is None and ok.outcome is Outcome.RATE_LIMITED:
        delay = _bucket_wait(job, shared.buckets)
    step = _STEPS[ok.outcome]
    state = step(job, spent, now, delay, ok.error or "", using)
    assert ends_in(JobState.RUNNING, ok.outcome, state), (ok.outcome, state)
    _close(job, ok.outcome, state, ok.error or "", ok.logs, now, using)
    if state is not None:
        if ok.result is not None and state == JobState.COMPLETED:
            leases.put_data(job, JobData.Kind.RESULT, ok.result, now, using)
        _save(job, state, spent, now, ok.error)
    transitions.acked([(job, ok.outcome, state)], now, using)
    return None if state is None else state.value


def _save(job: Job, state: JobState, spent: int, now: datetime, error: str | None) -> None:
    job.state = state.value
    job.attempt = spent
    job.lease_holder = None
    job.lease_expires_at = None
    if error:
        job.last_error = error
    job.save(update_fields=[
        "state", "attempt", "lease_holder", "lease_expires_at", "run_at", "finalized_at",
        "expires_at", "charged_weight", "last_error",
    ])


def finalize(job: Job, now: datetime) -> None:
    job.finalized_at = now
    job.expires_at = now + timedelta(milliseconds=job.retention_ms if job.retention_ms is not None else conf.get().RETENTION_MS)


def _complete(job: Job, spent: int, now: datetime, delay: int | None, error: str, using: str) -> JobState | None:
    if job.retention_ms == 0:
        delete_jobs([job.id], using)
        return None
    finalize(job, now)
    return JobState.COMPLETED


def _retry(job: Job, spent: int, now: datetime, delay: int | None, error: str, using: str) -> JobState:
    if policies.gives_up(spent, job.max_attempts):
        finalize(job, now)
        return JobState.FAILED
    settings = conf.get()
    wait = delay if delay is not None else policies.backoff_ms(spent, settings.RETRY_BASE_MS, settings.RETRY_CAP_MS, _rng)
    job.run_at = now + timedelta(milliseconds=wait)
    return JobState.RETRYABLE


def _reschedule(job: Job, spent: int, now: datetime, delay: int | None, error: str, using: str) -> JobState:
    job.run_at = now + timedelta(milliseconds=delay or 0)
    return JobState.SCHEDULED


def _bucket_wait(job: Job, held: buckets.Buckets) -> int:
    """A RATE_LIMITED ack's delay when it gave none: until the job's bucket holds its
    weight again (at most the longest delay an ack may give: a bucket deep in debt is
    full again past any date), or the base backoff if the class has no bucket."""
    wait = held.ms_until(job.rate_class, max(job.weight, 1.0))
    return conf.get().RETRY_BASE_MS if wait is None else min(max(wait, 1), validation.MAX_MS)


def _skip(job: Job, spent: int, now: datetime, delay: int | None, error: str, using: str) -> JobState:
    finalize(job, now)
    return JobState.SKIPPED


def _fail(job: Job, spent: int, now: datetime, delay: int | None, error: str, using: str) -> JobState:
    finalize(job, now)
    return JobState.FAILED


def _revoke(job: Job, spent: int, now: datetime, delay: int | None, error: str, using: str) -> None:
    delete_jobs([job.id], using)
    return None


_STEPS = {
    Outcome.SUCCESS: _complete,
    Outcome.RETRY: _retry,
    Outcome.SNOOZE: _reschedule,
    Outcome.RATE_LIMITED: _reschedule,  # its delay, if it gave none, is the bucket's wait
    Outcome.SKIP: _skip,
    Outcome.UNDECODABLE: _fail,
    Outcome.DISCARD: _fail,
    Outcome.REVOKE: _revoke,
}


def _close(
    job: Job, outcome: Outcome, state: JobState | None, error: str, logs: Sequence[str], now: datetime, using: str
) -> None:
    if state is None:
        return  # deleted: its runs went with the row
    recorded = outcome in RECORDED_OUTCOMES or (outcome is Outcome.SUCCESS and bool(logs))
    history.close_run(job.id, job.fence, outcome=outcome.value, error=error, logs=logs, recorded=recorded, now=now, using=using)


def delete_jobs(job_ids: Sequence[str], using: str) -> int:
    """Delete jobs with their runs and side data (the row is gone: not a state)."""
    if not job_ids:
        return 0
    connection = database.conn(using)
    marks = database.placeholders(job_ids)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM boson_run WHERE job_id IN ({marks})", list(job_ids))
        cursor.execute(f"DELETE FROM boson_job_data WHERE job_id IN ({marks})", list(job_ids))
        cursor.execute(f"DELETE FROM boson_job WHERE id IN ({marks})", list(job_ids))
        return cursor.rowcount
