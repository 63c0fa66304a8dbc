"""Fenced access: every write under a lease goes through :func:`hold`.

A write succeeds only if the job is in a leased state (``running``: ``states.LEASED``),
its fence equals the caller's and the lease has not expired on the store clock. The row
is locked first (where the engine locks rows; SQLite holds the write lock for the whole
transaction), so a reclaim or cancel cannot slip in between the check and the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from boson_django import clock, database, drivers, transitions, validation
from boson_django.errors import LeaseRejected, StoreError
from boson_django.models import Job, JobData
from boson_django.services import buckets, history
from boson_django.services.types import JobOutput, JobProgress, LeaseRef
from boson_django.states import LEASED, Event, JobState, require


def as_lease(lease: Any) -> LeaseRef:
    if type(lease) is LeaseRef and _plainly_valid(*lease):
        return lease  # a worker's own lease, as admission made it: acked once per job
    try:
        job_id, fence = lease
    except (TypeError, ValueError):
        raise validation.InvalidEnvelope("lease", f"must be a (job_id, fence) pair, got {lease!r}") from None
    return LeaseRef(validation.name(job_id, "lease.job_id", max_len=64), validation.whole(fence, "lease.fence", maximum=2**63 - 1))


def _plainly_valid(job_id: Any, fence: Any) -> bool:
    """What the full validation would accept, checked in a few C calls for the ids this
    store makes (ASCII, printable); anything else takes the full validation."""
    return (type(job_id) is str and 0 < len(job_id) <= 64 and job_id.isascii() and job_id.isprintable()
            and bool(job_id.strip()) and type(fence) is int and 0 <= fence <= 2**63 - 1)


#: Never loaded by a fenced write: a large payload is not read again at every ack or
#: checkpoint, and a row whose stored JSON Python cannot decode can still be acked.
PAYLOAD_FIELDS = ("args", "kwargs", "meta", "checkpoint")


def hold(lease: Any, now: datetime, using: str) -> Job:
    """The locked job row this lease still holds (payload columns deferred), or ``LeaseRejected``."""
    ref = as_lease(lease)
    # Locked by key alone, the lease checked here (a state in the query would steer the
    # planner to that state's partial index: docs/performance.md).
    job = Job.objects.using(using).select_for_update().filter(id=ref.job_id).defer(*PAYLOAD_FIELDS).first()
    why = refusal(ref, job, now)
    if why is not None:
        raise LeaseRejected(why)
    return job  # type: ignore[return-value]


def refusal(ref: LeaseRef, job: Any | None, now: datetime) -> str | None:
    """Why this lease may not write to ``job`` (its locked row: a Job or any row with
    ``fence``, ``state`` and ``lease_expires_at``), or None: the one rule of every fenced write."""
    if job is None:
        return f"job {ref.job_id} no longer exists"
    if job.fence != ref.fence:
        return f"job {ref.job_id}: fence {ref.fence} is stale (current fence {job.fence})"
    if JobState(job.state) not in LEASED:
        return f"job {ref.job_id} is {job.state}, not running"
    if job.lease_expires_at is None or job.lease_expires_at <= now:
        return f"job {ref.job_id}: lease expired at {job.lease_expires_at} (store time {now})"
    return None


@database.store_transaction
def renew(leases: Sequence[Any], lease_ms: int, *, using: str | None = None) -> list[str]:
    """Extend every lease still held; returns the ids of those LOST.

    Lost means expired on the store clock (reclaimed or not), re-claimed by another
    worker (fence moved), cancelled, finished or deleted. Never raises for a lost lease;
    idempotent (a second renewal moves the expiry again). One statement per as many
    leases as the engine lets one statement list.
    """
    refs = [as_lease(lease) for lease in leases]
    lease_ms = validation.whole(lease_ms, "lease_ms", minimum=1)
    if not refs:
        return []
    connection, driver = database.conn(using), drivers.for_alias(using)
    now = clock.now(database.alias(using))
    until = now + timedelta(milliseconds=lease_ms)
    kept: set[tuple[str, int]] = set()
    for part in database.in_slices(refs, database.most_listed(connection, each=2, besides=2)):
        kept |= driver.renew(connection, [(ref.job_id, ref.fence) for ref in part], until, now)
    return [ref.job_id for ref in refs if (ref.job_id, ref.fence) not in kept]


@database.store_transaction
def release(lease: Any, *, using: str | None = None) -> None:
    """Graceful hand-back on shutdown: running -> available, attempt and crash count kept.

    Locks the job; refunds the admission charge (the job will be charged again when
    re-admitted) and records the attempt as ``released``. ``LeaseRejected`` if the lease
    is not held (and nothing is written). Not idempotent: the first release ends the lease.
    """
    using = database.alias(using)
    now = clock.now(using)
    job = hold(lease, now, using)
    require(job.state, Event.RELEASE, JobState.AVAILABLE)
    buckets.reconcile(using, now, job.rate_class, job.charged_weight, 0.0)
    if not drivers.for_alias(using).release(database.conn(using), job.id, job.fence, now):
        raise StoreError(f"job {job.id}: its locked row changed under the lock")
    job.state, job.run_at = JobState.AVAILABLE.value, now
    job.lease_holder, job.lease_expires_at, job.charged_weight = None, None, 0.0
    history.close_run(job.id, job.fence, outcome="released", now=now, using=using)
    transitions.controlled("released", [job], using, outcome="released")


@database.store_transaction
def checkpoint(lease: Any, data: Any, *, using: str | None = None) -> None:
    """Persist step state; the next admission of this job hands it back."""
    validation.stored_json(data, "data")
    using = database.alias(using)
    job = hold(lease, clock.now(using), using)
    Job.objects.using(using).filter(id=job.id).update(checkpoint=data)


def put_data(job: Job, kind: str, data: Any, now: datetime, using: str) -> None:
    """Upsert one fenced side-data row; called only while the lease is held."""
    JobData.objects.using(using).update_or_create(
        job_id=job.id, kind=kind, defaults={"attempt": job.attempt + 1, "fence": job.fence, "at": now, "data": data}
    )


@database.store_transaction
def write_output(lease: Any, data: Any, *, using: str | None = None) -> JobOutput:
    """Store the handler's output (the latest write wins) under the lease."""
    validation.stored_json(data, "data")
    using = database.alias(using)
    now = clock.now(using)
    job = hold(lease, now, using)
    put_data(job, JobData.Kind.OUTPUT, data, now, using)
    return JobOutput(job.id, job.attempt + 1, job.fence, now, data)


@database.store_transaction
def write_progress(
    lease: Any, current: float, total: float | None = None, message: str = "", *, using: str | None = None
) -> JobProgress:
    """Store progress (``current`` of ``total``) under the lease. ``message`` is text of
    at most ``validation.MAX_PROGRESS_MESSAGE`` characters: a longer one raises
    ``InvalidEnvelope`` naming it, and nothing is written."""
    current = validation.amount(current, "current")
    total = None if total is None else validation.amount(total, "total")
    message = validation.progress_message(message)
    using = database.alias(using)
    now = clock.now(using)
    job = hold(lease, now, using)
    put_data(job, JobData.Kind.PROGRESS, {"current": current, "total": total, "message": message}, now, using)
    return JobProgress(job.id, job.attempt + 1, job.fence, now, current, total, message)
