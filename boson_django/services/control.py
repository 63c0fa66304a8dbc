"""Operator controls over jobs: cancel, retry, release from quarantine (queues: ``queues``).

Each job control takes many ids and works through them :data:`CHUNK` at a time, one
transaction per chunk, each job locked in id order and checked against the transition
table; a job whose state the event does not accept is refused (a lost race: reported,
nothing written). The one-id functions are the many-id ones applied to one id. Each
control decides the jobs' new columns here and writes them through the driver
(:meth:`~boson_django.drivers.control.ControlStatements.write_jobs`), guarded by the
states its event accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Count

from boson_django import clock, database, transitions
from boson_django.models import Job, QuarantinedFingerprint
from boson_django.services import buckets, chunked, decide, history, wakeups
from boson_django.services.chunked import Controlled
from boson_django.states import Event, JobState, allows

CANCELLED_ERROR = "boson_django.errors.JobCancelled: cancelled by operator"
#: Jobs per transaction of a many-job control: short enough not to hold locks long,
#: long enough that commits stop dominating (and within SQLite's parameters per statement).
CHUNK = 500


def _lock(job_ids: Sequence[str], event: Event, using: str) -> tuple[list[Job], Controlled]:
    """Lock the jobs in id order (no lock-order cycle with workers' batched acks); the
    ones ``event`` may move, and the result so far (unknown ids, refused states)."""
    locked = {job.id: job for job in Job.objects.using(using).without_payload().select_for_update()
              .filter(id__in=job_ids).order_by("id")}
    result = Controlled(unknown=[i for i in job_ids if i not in locked])
    allowed = [job for job in locked.values() if allows(job.state, event)]
    result.refused = [job.id for job in locked.values() if not allows(job.state, event)]
    return allowed, result


# -- cancel ----------------------------------------------------------------------------

def cancel(job_id: str, *, using: str | None = None) -> bool:
    """scheduled/available/retryable/running -> cancelled; ``False`` for a finished job.

    Locks the job. A running job is cancelled at once and its lease revoked: the holder's
    next ``renew`` reports it lost and every later write under that lease is refused. On
    PostgreSQL with NOTIFY the holder is told at commit and renews at once.
    Raises ``UnknownJob`` for an id the store does not hold. Idempotent in effect.
    """
    return chunked.one(cancel_jobs, job_id, using)


def cancel_jobs(job_ids: Iterable[str], *, using: str | None = None) -> Controlled:
    """:func:`cancel` of many jobs, :data:`CHUNK` per transaction; never raises for an
    unknown id (it is reported)."""
    return chunked.in_chunks(_cancel_chunk, job_ids, using, CHUNK)


@database.store_transaction
def _cancel_chunk(job_ids: Sequence[str], *, using: str | None = None) -> Controlled:
    """Locks the jobs, then (after all of them, as an ack does) their rate classes' buckets."""
    using = database.alias(using)
    jobs, result = _lock(job_ids, Event.CANCEL, using)
    now = clock.now(using)
    running = [job for job in jobs if job.state == JobState.RUNNING.value]
    waiting = [job for job in jobs if job.state != JobState.RUNNING.value]
    _revoke(running, now, using)
    history.record_many(waiting, outcome="cancelled", error=CANCELLED_ERROR, now=now, using=using)
    for job in jobs:
        _mark_cancelled(job, now)
    chunked.write(jobs, CANCELLED_FIELDS, Event.CANCEL, using)
    transitions.controlled("cancelled", waiting, using)
    transitions.controlled("cancelled", running, using, outcome="lease_revoked")
    result.done = [job.id for job in jobs]
    return result


def _revoke(running: list[Job], now: datetime, using: str) -> None:
    """End the leases of running jobs being cancelled: refund their admission charge,
    close their runs, tell their holders at commit."""
    held = buckets.Buckets(using, now)
    held.load({job.rate_class for job in running if job.rate_class})
    for job in running:
        held.reconcile(job.rate_class, job.charged_weight, 0.0)
    held.save()
    history.close_runs([(job.id, job.fence) for job in running], outcome="cancelled", error=CANCELLED_ERROR, now=now, using=using)
    for holder in {job.lease_holder for job in running}:
        wakeups.revoke_at_commit(holder, using)


CANCELLED_FIELDS = ("state", "last_error", "lease_holder", "lease_expires_at", "charged_weight", "finalized_at", "expires_at")


def _mark_cancelled(job: Job, now: datetime) -> None:
    job.state = JobState.CANCELLED.value
    job.last_error = CANCELLED_ERROR
    job.lease_holder, job.lease_expires_at, job.charged_weight = None, None, 0.0
    job.finalized_at, job.expires_at = now, decide.expiry(job, now)


# -- retry -----------------------------------------------------------------------------

def retry(job_id: str, *, using: str | None = None) -> bool:
    """failed/cancelled -> available now; ``False`` otherwise, and ``False`` when a newer
    live job holds the same ``unique_key`` (the unique index refuses the retry; nothing
    is written). :func:`retry_jobs` tells the two apart.

    ``attempt`` and ``crash_attempt`` keep counting (history stays honest; only a
    quarantine release resets crashes); if the job had spent its budget,
    ``max_attempts`` is raised by one so it gets exactly one more try (as Oban does).
    Locks the job; raises ``UnknownJob`` for an id the store does not hold.
    """
    return chunked.one(retry_jobs, job_id, using)


def retry_jobs(job_ids: Iterable[str], *, using: str | None = None) -> Controlled:
    """:func:`retry` of many jobs, :data:`CHUNK` per transaction; a job whose unique_key
    a newer live job holds is reported in ``key_held``."""
    return chunked.in_chunks(_retry_chunk, job_ids, using, CHUNK)


@database.store_transaction
def _retry_chunk(job_ids: Sequence[str], *, using: str | None = None) -> Controlled:
    using = database.alias(using)
    jobs, result = _lock(job_ids, Event.RETRY, using)
    now = clock.now(using)
    retried = _revive(jobs, now, using)
    result.key_held = sorted({job.id for job in jobs} - {job.id for job in retried})
    history.record_many(retried, outcome="retried", error="retried by operator", now=now, using=using)
    transitions.controlled("retried", retried, using)
    wakeups.notify_at_commit({job.queue for job in retried}, using)
    result.done = [job.id for job in retried]
    return result


def _revive(jobs: list[Job], now: datetime, using: str) -> list[Job]:
    """Make failed or cancelled jobs available again; the ones made so. A job whose
    unique_key a newer live job holds is left as it was (the unique index refuses it),
    so each job with a key is written alone, under a savepoint that survives the refusal."""
    for job in jobs:
        job.max_attempts = max(job.max_attempts, job.attempt + 1)
        _set_available(job, now)
    keyless = [job for job in jobs if job.unique_key is None]
    chunked.write(keyless, AVAILABLE_FIELDS, Event.RETRY, using)
    return keyless + [job for job in jobs if job.unique_key is not None and _written_alone(job, using)]


def _written_alone(job: Job, using: str) -> bool:
    try:
        with transaction.atomic(using=using):
            chunked.write([job], AVAILABLE_FIELDS, Event.RETRY, using)
    except IntegrityError:
        return False
    return True


# -- release from quarantine -------------------------------------------------------------

def release_quarantined(job_id: str, *, using: str | None = None) -> bool:
    """quarantined -> available with crash_attempt 0, clearing the fingerprint.

    Every job parked under the same fingerprint is released with it (they were parked
    only because of it); :func:`release_jobs` counts them. ``False`` if the job is not
    quarantined. Raises ``UnknownJob`` for an id the store does not hold.

    Locks the fingerprint's row before any job (no deadlock between two releases of one
    fingerprint; an enqueue parking a job under it holds the row, so the release finds
    that job once the enqueue commits), then its parked jobs in id order.
    """
    return chunked.one(release_jobs, job_id, using)


def release_jobs(job_ids: Iterable[str], *, using: str | None = None) -> Controlled:
    """:func:`release_quarantined` of many jobs; ``also`` counts the parked copies
    released with them. The ids go in chunks of whole fingerprints, so the ids of one
    fingerprint are released together instead of a later chunk finding them released
    already (and calling that a lost race)."""
    ids = chunked.checked(job_ids)
    fingerprints = _fingerprints_of(ids, using)
    chunks = _by_fingerprint([i for i in ids if i in fingerprints], fingerprints, _parked_counts(fingerprints, using))
    return chunked.each_chunk([(chunk, [i for group in chunk.values() for i in group]) for chunk in chunks],
                       _release_chunk, using, Controlled(unknown=[i for i in ids if i not in fingerprints]))


def _fingerprints_of(job_ids: Sequence[str], using: str | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for start in range(0, len(job_ids), CHUNK):
        chunk = job_ids[start : start + CHUNK]
        found.update(Job.objects.using(database.alias(using)).filter(id__in=chunk).values_list("id", "fingerprint"))
    return found


def _parked_counts(fingerprints: dict[str, str], using: str | None) -> dict[str, int]:
    """How many jobs each fingerprint holds quarantined: what releasing it locks and writes."""
    distinct = sorted(set(fingerprints.values()))
    counts: dict[str, int] = {}
    for start in range(0, len(distinct), CHUNK):
        counts.update(Job.objects.using(database.alias(using))
                      .filter(fingerprint__in=distinct[start : start + CHUNK], state=JobState.QUARANTINED.value)
                      .values("fingerprint").annotate(n=Count("id")).values_list("fingerprint", "n"))
    return counts


def _by_fingerprint(job_ids: list[str], fingerprints: dict[str, str], parked: dict[str, int]) -> list[dict[str, list[str]]]:
    """The ids grouped by fingerprint, in chunks of about :data:`CHUNK` jobs released (a
    fingerprint is never split): sized by the jobs a chunk frees, not the ids asked for."""
    groups: dict[str, list[str]] = {}
    for job_id in job_ids:
        groups.setdefault(fingerprints[job_id], []).append(job_id)
    chunks: list[dict[str, list[str]]] = []
    size = CHUNK
    for fingerprint, ids in sorted(groups.items()):
        if size >= CHUNK:
            chunks.append({})
            size = 0
        chunks[-1][fingerprint] = ids
        size += max(len(ids), parked.get(fingerprint, 0))
    return chunks


@database.store_transaction
def _release_chunk(asked: dict[str, list[str]], *, using: str | None = None) -> Controlled:
    """Releases each fingerprint one of whose asked-for jobs is still quarantined."""
    using = database.alias(using)
    holders = QuarantinedFingerprint.objects.using(using).filter(fingerprint__in=list(asked))
    list(holders.select_for_update().order_by("fingerprint").values_list("fingerprint", flat=True))  # first
    parked = list(Job.objects.using(using).without_payload().select_for_update().filter(
        fingerprint__in=list(asked), state=JobState.QUARANTINED.value
    ).order_by("id"))
    parked_ids = {job.id for job in parked}
    result = _not_parked([i for ids in asked.values() for i in ids if i not in parked_ids], using)
    for ids in asked.values():
        result.done += [i for i in ids if i in parked_ids]
    freed = {fingerprint for fingerprint, ids in asked.items() if parked_ids.intersection(ids)}
    released = [job for job in parked if job.fingerprint in freed]
    holders.filter(fingerprint__in=freed).delete()
    _make_released(released, clock.now(using), using)
    result.also = len(released) - len(result.done)
    return result


def _not_parked(job_ids: list[str], using: str) -> Controlled:
    """Asked-for jobs found not quarantined: refused, or unknown if evicted meanwhile."""
    present = set(Job.objects.using(using).filter(id__in=job_ids).values_list("id", flat=True))
    return Controlled(refused=[i for i in job_ids if i in present], unknown=[i for i in job_ids if i not in present])


def _make_released(jobs: list[Job], now: datetime, using: str) -> None:
    # "unquarantined" fits Run.outcome (16 chars; PostgreSQL enforces it, SQLite does not).
    history.record_many(jobs, outcome="unquarantined", error="released by operator", now=now, using=using)
    for job in jobs:
        job.crash_attempt = 0  # the release row resets the crash count; operator retry keeps it
        _set_available(job, now)
    chunked.write(jobs, AVAILABLE_FIELDS, Event.RELEASE_QUARANTINE, using)
    transitions.controlled("unquarantined", jobs, using)
    wakeups.notify_at_commit({job.queue for job in jobs}, using)


AVAILABLE_FIELDS = ("state", "crash_attempt", "max_attempts", "run_at", "finalized_at", "expires_at")


def _set_available(job: Job, now: datetime) -> None:
    job.state = JobState.AVAILABLE.value
    job.run_at = now
    job.finalized_at = job.expires_at = None
