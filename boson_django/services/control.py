"""Operator controls over jobs: cancel, retry, release from quarantine (queues: ``queues``).

Each job control takes many ids (an admin bulk action hands over thousands) and works
through them :data:`CHUNK` at a time, one transaction per chunk, each job locked and
checked against the transition table as before. One transaction per job cost a commit
per job: 10,000 jobs took 40 s on PostgreSQL, past a proxy's timeout. The one-id
functions of the public API are the many-id ones applied to one id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Count

from boson_django import clock, transitions, validation
from boson_django.errors import ControlInterrupted, UnknownJob
from boson_django.models import Job, QuarantinedFingerprint
from boson_django import database
from boson_django.services import buckets, decide, history, wakeups
from boson_django.states import Event, JobState, allows

CANCELLED_ERROR = "boson_django.errors.JobCancelled: cancelled by operator"
#: Jobs per transaction of a many-job control: short enough not to hold locks long,
#: long enough that commits stop dominating (and within SQLite's parameters per statement).
CHUNK = 500


@dataclass
class Controlled:
    """What a job control did with the ids it was given; each id lands in one list."""

    done: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # the job's state does not allow it (any more)
    key_held: list[str] = field(default_factory=list)  # retry: a newer live job holds its unique_key
    unknown: list[str] = field(default_factory=list)  # no such job (never was, or deleted)
    also: int = 0  # jobs changed besides the ids given: a release's parked copies

    def add(self, other: Controlled) -> None:
        self.done += other.done
        self.refused += other.refused
        self.key_held += other.key_held
        self.unknown += other.unknown
        self.also += other.also


Chunk = Callable[..., Controlled]


def _in_chunks(control: Chunk, job_ids: Iterable[str], using: str | None) -> Controlled:
    """Run ``control`` (one transaction) over the distinct, checked ids, a chunk at a time."""
    ids = _checked(job_ids)
    size = min(CHUNK, database.most_listed(database.conn(using), each=2, besides=_BOUND_BESIDES_JOBS))
    return _each_chunk([(chunk, chunk) for chunk in database.in_slices(ids, size)], control, using, Controlled())


#: Parameters a control's statements bind besides two per job (the runs a cancel closes
#: are matched by job and fence): a chunk of 500 bound 1,003, past the 999 that SQLite
#: before 3.32 allows, and every cancel of that many running jobs failed.
_BOUND_BESIDES_JOBS = 8


def _checked(job_ids: Iterable[str]) -> list[str]:
    """The distinct ids, each checked (a bad one names the field before anything is written)."""
    ids = list(dict.fromkeys(job_ids))
    for job_id in ids:
        validation.name(job_id, "id", max_len=64)
    return ids


def _each_chunk(chunks: list[tuple[Any, list[str]]], control: Chunk, using: str | None, total: Controlled) -> Controlled:
    """Apply ``control`` to each chunk (its argument, and the ids it holds) in turn.

    A database error stops the run with :class:`ControlInterrupted`, which carries what
    the committed chunks did: raised as it was, the error would hide that they committed
    (an operator's bulk action over 12,000 jobs stopped at a lock timeout after 500)."""
    for position, (argument, _) in enumerate(chunks):
        try:
            total.add(control(argument, using=using))
        except DatabaseError as exc:
            not_reached = [job_id for _, ids in chunks[position:] for job_id in ids]
            raise ControlInterrupted(total, not_reached, exc) from exc
    return total


def _one(control: Callable[..., Controlled], job_id: str, using: str | None) -> bool:
    """A many-id control applied to one id, answering as the public API's one-id function:
    ``UnknownJob`` for an id the store does not hold, the database's own error as is."""
    try:
        result = control([job_id], using=using)
    except ControlInterrupted as exc:
        raise exc.__cause__ from None  # type: ignore[misc]
    if result.unknown:
        raise UnknownJob(f"no job {job_id!r}")
    return bool(result.done)


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
    return _one(cancel_jobs, job_id, using)


def cancel_jobs(job_ids: Iterable[str], *, using: str | None = None) -> Controlled:
    """:func:`cancel` of many jobs, :data:`CHUNK` per transaction; never raises for an
    unknown id (it is reported)."""
    return _in_chunks(_cancel_chunk, job_ids, using)


@database.store_transaction
def _cancel_chunk(job_ids: Sequence[str], *, using: str | None = None) -> Controlled:
    """Locks the jobs, then (after all of them, as an ack does) their rate classes' buckets."""
    assert using is not None
    jobs, result = _lock(job_ids, Event.CANCEL, using)
    now = clock.now(using)
    running = [job for job in jobs if job.state == JobState.RUNNING.value]
    waiting = [job for job in jobs if job.state != JobState.RUNNING.value]
    _revoke(running, now, using)
    history.record_many(waiting, outcome="cancelled", error=CANCELLED_ERROR, now=now, using=using)
    for job in jobs:
        _mark_cancelled(job, now)
    _write(jobs, CANCELLED_FIELDS, using)
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
    return _one(retry_jobs, job_id, using)


def retry_jobs(job_ids: Iterable[str], *, using: str | None = None) -> Controlled:
    """:func:`retry` of many jobs, :data:`CHUNK` per transaction; a job whose unique_key
    a newer live job holds is reported in ``key_held``."""
    return _in_chunks(_retry_chunk, job_ids, using)


@database.store_transaction
def _retry_chunk(job_ids: Sequence[str], *, using: str | None = None) -> Controlled:
    assert using is not None
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
    _write(keyless, AVAILABLE_FIELDS, using)
    return keyless + [job for job in jobs if job.unique_key is not None and _written_alone(job, using)]


def _written_alone(job: Job, using: str) -> bool:
    try:
        with transaction.atomic(using=using):
            _write([job], AVAILABLE_FIELDS, using)
    except IntegrityError:
        return False
    return True


# -- release from quarantine -------------------------------------------------------------

def release_quarantined(job_id: str, *, using: str | None = None) -> bool:
    """quarantined -> available with crash_attempt 0, clearing the fingerprint.

    Every job parked under the same fingerprint is released with it (they were parked
    only because of it); :func:`release_jobs` counts them. ``False`` if the job is not
    quarantined. Raises ``UnknownJob`` for an id the store does not hold.

    Locks the fingerprint's row before any job, then its parked jobs in id order. Two
    releases of one fingerprint's jobs locking their own job first deadlocked on each
    other's; and an enqueue that parks a job under the fingerprint holds the row (it
    reads it FOR KEY SHARE), so the release finds that job once the enqueue commits instead
    of leaving it parked behind a cleared fingerprint.
    """
    return _one(release_jobs, job_id, using)


def release_jobs(job_ids: Iterable[str], *, using: str | None = None) -> Controlled:
    """:func:`release_quarantined` of many jobs; ``also`` counts the parked copies
    released with them. The ids go in chunks of whole fingerprints, so the ids of one
    fingerprint are released together instead of a later chunk finding them released
    already (and calling that a lost race)."""
    ids = _checked(job_ids)
    fingerprints = _fingerprints_of(ids, using)
    chunks = _by_fingerprint([i for i in ids if i in fingerprints], fingerprints, _parked_counts(fingerprints, using))
    return _each_chunk([(chunk, [i for group in chunk.values() for i in group]) for chunk in chunks],
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
    fingerprint is never split). A chunk is sized by the jobs it frees, not the ids asked
    for: 500 fingerprints with 200 parked copies each were 100,000 row locks in one
    transaction."""
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
    assert using is not None
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
    _write(jobs, AVAILABLE_FIELDS, using)
    transitions.controlled("unquarantined", jobs, using)
    wakeups.notify_at_commit({job.queue for job in jobs}, using)


AVAILABLE_FIELDS = ("state", "crash_attempt", "max_attempts", "run_at", "finalized_at", "expires_at")


def _set_available(job: Job, now: datetime) -> None:
    job.state = JobState.AVAILABLE.value
    job.run_at = now
    job.finalized_at = job.expires_at = None


def _write(jobs: list[Job], fields: Sequence[str], using: str) -> None:
    """Save ``fields`` of locked jobs: one UPDATE per distinct set of values (a chunk's
    jobs mostly share them), not one per job -- a round trip per job was most of a bulk
    action's time."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for job in jobs:
        groups.setdefault(tuple(getattr(job, name) for name in fields), []).append(job.id)
    for values, ids in groups.items():
        Job.objects.using(using).filter(id__in=ids).update(**dict(zip(fields, values)))
