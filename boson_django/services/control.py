"""Operator controls: cancel, retry, release from quarantine, pause, resume and delete queues."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from boson_django import clock, transitions, validation
from boson_django.errors import UnknownJob
from boson_django.models import Job, QuarantinedFingerprint, Queue
from boson_django.services import _db, acks, buckets, history, wakeups
from boson_django.states import Event, JobState, allows

CANCELLED_ERROR = "boson_django.errors.JobCancelled: cancelled by operator"


def _locked(job_id: str, using: str) -> Job:
    return _found(_job(job_id, using).select_for_update().first(), job_id)


def _job(job_id: str, using: str) -> Any:
    """The query for one job by an id an operator gave (checked, so a bad one names the field)."""
    validation.name(job_id, "id", max_len=64)
    return Job.objects.using(using).filter(id=job_id)


def _found(value: Any, job_id: str) -> Any:
    if value is None:
        raise UnknownJob(f"no job {job_id!r}")
    return value


@_db.store_transaction
def cancel(job_id: str, *, using: str | None = None) -> bool:
    """scheduled/available/retryable/running -> cancelled; ``False`` for a finished job.

    Locks the job. A running job is cancelled at once and its lease revoked: the holder's
    next ``renew`` reports it lost and every later write under that lease is refused. On
    PostgreSQL with NOTIFY the holder is told at commit and renews at once.
    Raises ``UnknownJob`` for an id the store does not hold. Idempotent in effect.
    """
    assert using is not None
    job = _locked(job_id, using)
    if not allows(job.state, Event.CANCEL):
        return False
    now = clock.now(using)
    was_running = job.state == JobState.RUNNING.value
    if was_running:
        buckets.reconcile(using, now, job.rate_class, job.charged_weight, 0.0)
        history.close_run(job.id, job.fence, outcome="cancelled", error=CANCELLED_ERROR, now=now, using=using)
        wakeups.revoke_at_commit(job.lease_holder, using)
    else:
        history.record(job, outcome="cancelled", error=CANCELLED_ERROR, now=now, using=using)
    job.state = JobState.CANCELLED.value
    job.last_error = CANCELLED_ERROR
    job.lease_holder, job.lease_expires_at, job.charged_weight = None, None, 0.0
    acks.finalize(job, now)
    job.save(update_fields=[
        "state", "last_error", "lease_holder", "lease_expires_at", "charged_weight", "finalized_at", "expires_at",
    ])
    transitions.controlled("cancelled", [job], using, outcome="lease_revoked" if was_running else None)
    return True


@_db.store_transaction
def retry(job_id: str, *, using: str | None = None) -> bool:
    """failed/cancelled -> available now; ``False`` otherwise, and ``False`` when a newer
    live job holds the same ``unique_key`` (the unique index refuses the retry; nothing
    is written).

    ``attempt`` and ``crash_attempt`` keep counting (history stays honest; only a
    quarantine release resets crashes); if the job had spent its budget,
    ``max_attempts`` is raised by one so it gets exactly one more try (as Oban does).
    """
    assert using is not None
    job = _locked(job_id, using)
    if not allows(job.state, Event.RETRY):
        return False
    now = clock.now(using)
    job.max_attempts = max(job.max_attempts, job.attempt + 1)
    try:
        with transaction.atomic(using=using):
            _make_available(job, now)
    except IntegrityError:
        return False  # a newer live job holds its unique_key: retrying would duplicate it
    history.record(job, outcome="retried", error="retried by operator", now=now, using=using)
    transitions.controlled("retried", [job], using)
    wakeups.notify_at_commit([job.queue], using)
    return True


@_db.store_transaction
def release_quarantined(job_id: str, *, using: str | None = None) -> bool:
    """quarantined -> available with crash_attempt 0, clearing the fingerprint.

    Every job parked under the same fingerprint is released with it (they were parked
    only because of it). ``False`` if the job is not quarantined.

    Locks the fingerprint's row before any job, then its parked jobs in id order. Two
    releases of one fingerprint's jobs locking their own job first deadlocked on each
    other's; and an enqueue that parks a job under the fingerprint holds the row (it
    reads it FOR KEY SHARE), so the release finds that job once the enqueue commits instead
    of leaving it parked behind a cleared fingerprint.
    """
    assert using is not None
    fingerprint = _fingerprint_of(job_id, using)
    holders = QuarantinedFingerprint.objects.using(using).filter(fingerprint=fingerprint)
    list(holders.select_for_update().values_list("fingerprint", flat=True))  # the lock, taken first
    parked = list(Job.objects.using(using).select_for_update().filter(
        fingerprint=fingerprint, state=JobState.QUARANTINED.value
    ).order_by("id"))
    if job_id not in {each.id for each in parked}:
        return False
    now = clock.now(using)
    holders.delete()
    for each in parked:
        # "unquarantined" fits Run.outcome (16 chars; PostgreSQL enforces it, SQLite does not).
        history.record(each, outcome="unquarantined", error="released by operator", now=now, using=using)
        each.crash_attempt = 0  # the release row resets the crash count; operator retry keeps it
        _make_available(each, now)
    transitions.controlled("unquarantined", parked, using)
    wakeups.notify_at_commit([each.queue for each in parked], using)
    return True


def _fingerprint_of(job_id: str, using: str) -> str:
    return _found(_job(job_id, using).values_list("fingerprint", flat=True).first(), job_id)


def _make_available(job: Job, now: Any) -> None:
    job.state = JobState.AVAILABLE.value
    job.run_at = now
    job.finalized_at = job.expires_at = None
    job.save(update_fields=["state", "crash_attempt", "max_attempts", "run_at", "finalized_at", "expires_at"])


@_db.store_transaction
def pause_queue(name: str, *, using: str | None = None) -> None:
    """Stop admitting from this queue (running jobs go on). Idempotent.

    Locks the queue's row. Pausing a paused queue changes nothing: ``paused_at`` keeps
    the first pause, so an operator sees how long the queue has been held, not when
    someone last pressed Pause.
    """
    validation.name(name, "name")
    now = clock.now(using)
    queue, created = Queue.objects.using(using).select_for_update().get_or_create(
        name=name, defaults={"paused": True, "paused_at": now}
    )
    if not created and not queue.paused:
        queue.paused, queue.paused_at = True, now
        queue.save(using=using, update_fields=["paused", "paused_at"])


@_db.store_transaction
def resume_queue(name: str, *, using: str | None = None) -> None:
    """Admit from this queue again, and wake idle workers for its waiting jobs. Idempotent."""
    validation.name(name, "name")
    Queue.objects.using(using).update_or_create(name=name, defaults={"paused": False, "paused_at": None})
    wakeups.notify_at_commit([name], using)


def reason_to_keep_queue(name: str, *, using: str | None = None) -> str | None:
    """Why the queue's row may not be deleted now, or None when it may (read only).

    The row holds the queue's pause, and the admin's lists and the dashboard find a
    queue's jobs through it: a paused queue keeps its row (deleting it would resume the
    queue for the next job enqueued to it), and so does one that any job, in any state,
    still names.
    """
    db = _db.alias(using)
    paused = Queue.objects.using(db).filter(name=name).values_list("paused", flat=True).first()
    if paused is None:
        return "no such queue"
    if paused:
        return "it is paused (resume it first)"
    if Job.objects.using(db).filter(queue=name).exists():
        return "jobs are still in it"
    return None


@_db.store_transaction
def delete_queue(name: str, *, using: str | None = None) -> bool:
    """Delete an idle queue's row: one that is not paused and that no job names. ``False``,
    and nothing changed, for any other (see :func:`reason_to_keep_queue`). Idempotent.

    Locks the queue's row, so a pause or resume in flight finishes first. The next job
    enqueued to the name creates the row again, unpaused. On PostgreSQL a job whose
    enqueue commits while the row is being deleted can end up in a queue with no row
    until the next enqueue to it; it is admitted all the same (only a paused row holds
    jobs back).
    """
    validation.name(name, "name")
    if not Queue.objects.using(using).select_for_update().filter(name=name).exists():
        return False
    if reason_to_keep_queue(name, using=using) is not None:
        return False
    Queue.objects.using(using).filter(name=name).delete()
    return True
