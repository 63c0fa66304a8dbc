"""The three sweeps: promote, reclaim, evict. Each is bounded by ``limit`` and safe on
many nodes at once: its jobs are picked locked, skipping rows another transaction holds
(where the engine locks rows), so two sweepers never touch one job. Each decides here
and writes through the driver (:mod:`boson_django.drivers.sweeps`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from boson_django import clock, database, drivers, policies, transitions, validation
from boson_django.models import QuarantinedFingerprint
from boson_django.services import acks, history
from boson_django.services.types import Reclaimed
from boson_django.states import Event, JobState, require

#: Parameters a sweep's statements bind besides two per job (the runs a reclaim closes
#: are matched by job and fence).
_BOUND_BESIDES_JOBS = 8


def _due(using: str, event: Event, deadline: str, limit: int, columns: str) -> tuple[list[dict[str, Any]], datetime]:
    """Up to ``limit`` jobs ``event`` may move whose ``deadline`` column has passed on the
    store clock, the longest overdue first, locked (skipping rows another sweeper holds);
    and the store's now they were picked at."""
    limit = validation.whole(limit, "limit")
    now = clock.now(using)
    connection = database.conn(using)
    limit = min(limit, _most_jobs(connection))
    return drivers.for_alias(using).pick_due(connection, event, deadline, now, limit, columns), now


def _most_jobs(connection: Any) -> int:
    """The most jobs one sweep may take so that its statements, which list the jobs,
    bind no more parameters than the store allows (a larger batch would fail on every
    tick, and the sweep stop for good)."""
    return database.most_listed(connection, each=2, besides=_BOUND_BESIDES_JOBS)


@database.store_transaction
def promote_due(limit: int = 1000, *, using: str | None = None) -> int:
    """scheduled/retryable jobs whose run_at has come -> available. Returns how many.
    A job another transaction holds is left for the next call."""
    using = database.alias(using)
    picked, _ = _due(using, Event.PROMOTE, "run_at", limit, "id, queue, task, fence")
    if not picked:
        return 0
    transitions.swept("promoted", picked, using, state=JobState.AVAILABLE.value)
    return drivers.for_alias(using).promote(database.conn(using), [r["id"] for r in picked])


@database.store_transaction
def reclaim_expired(limit: int = 1000, *, using: str | None = None) -> list[Reclaimed]:
    """running jobs whose lease expired -> available (crash_attempt + 1), or quarantined
    when that brings crash_attempt to the job's crash limit (its fingerprint registered).

    ``attempt`` is left alone: a crash does not burn a retry. Records ``lease_lost``.

    Fewer than ``limit``, or none, may come back while expired leases remain: a job row
    another transaction holds (PostgreSQL ``SKIP LOCKED``: another reclaimer, an ack,
    renewal or cancel in flight) and a job bound for quarantine whose fingerprint another
    transaction holds (see :func:`_without_busy_fingerprints`) are left for the next
    call, which takes them once that transaction ends. Nothing else is passed over (and
    every running job has a lease expiry: a claim always sets one), so no expired lease
    stays behind for good; to empty the backlog, call until no expired lease is left,
    not until the first short batch.
    """
    using = database.alias(using)
    rows, now = _due(using, Event.RECLAIM, "lease_expires_at", limit,
                     "id, task, queue, fence, crash_attempt, crash_limit, fingerprint, lease_holder")
    connection = database.conn(using)
    for row in rows:
        row["to"] = reclaim_target(row["crash_attempt"], row["crash_limit"])
    rows = _without_busy_fingerprints(rows, connection)
    if not rows:
        return []
    out: list[Reclaimed] = []
    for target in (JobState.AVAILABLE, JobState.QUARANTINED):
        group = [r for r in rows if r["to"] is target]
        if group:
            drivers.for_alias(using).reclaim(connection, [r["id"] for r in group], target, now, _LOST)
        out += [Reclaimed(r["id"], r["fence"], target.value, r["crash_attempt"] + 1) for r in group]
    history.close_runs(
        [(r["id"], r["fence"]) for r in rows], outcome="lease_lost",
        error="boson_django.errors.LeaseLost: lease expired: the worker stopped renewing (crash, kill or stall)", now=now, using=using,
    )
    _register_fingerprints([r for r in rows if r["to"] is JobState.QUARANTINED], now, using)
    transitions.swept("reclaimed", [{**r, "to": r["to"].value} for r in rows], using, state=None, outcome="lease_lost")
    return out


def _without_busy_fingerprints(rows: list[dict[str, Any]], connection: Any) -> list[dict[str, Any]]:
    """Lock the registered fingerprints the rows bound for quarantine (their ``to``) would
    be quarantined under (in order, ``SKIP LOCKED``) and leave out the rows whose
    fingerprint another transaction holds: they stay expired for the next sweep.

    The holder may be a release from quarantine, which locks the fingerprint and then
    every job parked under it. This sweep must not wait for it: besides its own jobs it
    may hold a lock on a job another reclaimer has just quarantined (a ``SKIP LOCKED``
    scan keeps the lock on a row whose recheck failed), and the release waits for that
    job -- a deadlock, seen with one release against four reclaimers."""
    bound = sorted({r["fingerprint"] for r in rows if r["to"] is JobState.QUARANTINED})
    if not bound:
        return rows
    with connection.cursor() as cursor:
        _, busy = database.lock_by_key(cursor, "boson_quarantined_fingerprint", "fingerprint", "job_id", bound, wait=False)
    return [r for r in rows if r["fingerprint"] not in busy or r["to"] is not JobState.QUARANTINED]


_LOST = "boson_django.errors.LeaseLost: lease expired (worker crash or stall)"


def reclaim_target(crash_attempt: int, crash_limit: int) -> JobState:
    """Where a job whose lease expired goes: quarantined once this crash reaches its
    crash limit, available otherwise (both allowed by the table)."""
    target = JobState.QUARANTINED if policies.quarantines(crash_attempt + 1, crash_limit) else JobState.AVAILABLE
    require(JobState.RUNNING, Event.RECLAIM, target)
    return target


def _register_fingerprints(rows: list[dict[str, Any]], now: datetime, using: str) -> None:
    """In fingerprint order, so two reclaimers inserting the same two never deadlock.

    A fingerprint already registered is locked, not just read (by
    :func:`_without_busy_fingerprints`, before the jobs moved): an operator releasing it
    meanwhile (:func:`~boson_django.services.control.release_quarantined`) would delete
    it without seeing the job quarantined here, which would stay parked under a
    fingerprint that is gone. Locked, the release waits for this commit and frees that
    job too. One that another reclaimer registered meanwhile is locked ``FOR NO KEY
    UPDATE``: that blocks a release's delete but not an enqueue parking a job under it
    (``FOR KEY SHARE``), which may be waiting for one of these jobs' unique keys."""
    for row in sorted({r["fingerprint"]: r for r in reversed(rows)}.values(), key=lambda r: r["fingerprint"]):
        QuarantinedFingerprint.objects.using(using).select_for_update(no_key=True).get_or_create(
            fingerprint=row["fingerprint"],
            defaults={
                "task": row["task"], "job_id": row["id"], "quarantined_at": now,
                "reason": f"job {row['id']} lost its lease {row['crash_attempt'] + 1} times",
            },
        )


@database.store_transaction
def evict_retained(limit: int = 1000, *, using: str | None = None) -> int:
    """Delete finished jobs whose retention has passed (the states the table lets evict;
    quarantined jobs never expire). Returns how many."""
    using = database.alias(using)
    picked, _ = _due(using, Event.EVICT, "expires_at", limit, "id, queue, task, fence")
    transitions.swept("evicted", picked, using, state=None)
    return acks.delete_jobs([r["id"] for r in picked], using)
