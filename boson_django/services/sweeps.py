"""The three sweeps. Each is bounded by ``limit`` and safe on many nodes at once:
PostgreSQL rows are taken with ``SKIP LOCKED``, so two sweepers never touch one job."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from boson_django import clock, policies, transitions, validation
from boson_django.models import QuarantinedFingerprint
from boson_django import database, drivers
from boson_django.services import acks, history
from boson_django.services.types import Reclaimed
from boson_django.states import PENDING, TERMINAL, JobState

_PENDING_SQL = ", ".join(f"'{s.value}'" for s in sorted(PENDING))
_TERMINAL_SQL = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))


#: Parameters a sweep's statements bind besides two per job (the runs a reclaim closes
#: are matched by job and fence).
_BOUND_BESIDES_JOBS = 8


def _due(using: str, where: str, deadline: str, limit: int, columns: str) -> tuple[list[dict[str, Any]], datetime]:
    """Up to ``limit`` rows in ``where`` whose ``deadline`` column has passed on the store
    clock, the longest overdue first, locked (skipping rows another sweeper holds); and
    the store's now they were picked at."""
    limit = validation.whole(limit, "limit")
    now = clock.now(using)
    connection = database.conn(using)
    limit = min(limit, _most_jobs(connection))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM boson_job WHERE {where} AND {deadline} <= %s ORDER BY {deadline} LIMIT %s"
            f"{drivers.for_connection(connection).lock_rows_skip_locked()}",
            [database.dt_param(connection, now), limit],
        )
        return database.fetch_dicts(cursor), now


def _most_jobs(connection: Any) -> int:
    """The most jobs one sweep may take so that its statements, which list the jobs,
    bind no more parameters than the store allows. A larger ``limit`` (``SWEEP_BATCH``)
    made a sweep on SQLite fail with "too many SQL variables" on every tick once that
    many jobs were due, and promotion, reclaim or eviction stopped for good (999
    parameters before SQLite 3.32: a reclaim of 499 jobs, a promotion of 1,000, the
    default ``SWEEP_BATCH``; 32,766 by default since: a reclaim of 16,382)."""
    return database.most_listed(connection, each=2, besides=_BOUND_BESIDES_JOBS)


@database.store_transaction
def promote_due(limit: int = 1000, *, using: str | None = None) -> int:
    """scheduled/retryable jobs whose run_at has come -> available. Returns how many."""
    assert using is not None
    picked, _ = _due(using, f"state IN ({_PENDING_SQL})", "run_at", limit, "id, queue, task, fence")
    due = [r["id"] for r in picked]
    if not due:
        return 0
    transitions.swept("promoted", picked, using, state="available")
    with database.conn(using).cursor() as cursor:
        cursor.execute(
            f"UPDATE boson_job SET state = 'available' WHERE state IN ({_PENDING_SQL}) "
            f"AND id IN ({database.placeholders(due)})",
            due,
        )
        return cursor.rowcount


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
    assert using is not None
    rows, now = _due(using, "state = 'running'", "lease_expires_at", limit,
                     "id, task, queue, fence, crash_attempt, crash_limit, fingerprint, lease_holder")
    connection = database.conn(using)
    for row in rows:
        row["to"] = _reclaim_target(row)
    rows = _without_busy_fingerprints(rows, connection)
    if not rows:
        return []
    out: list[Reclaimed] = []
    for target in (JobState.AVAILABLE, JobState.QUARANTINED):
        group = [r for r in rows if r["to"] is target]
        _move_reclaimed(group, target, now, connection)
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


def _reclaim_target(row: dict[str, Any]) -> JobState:
    """Where an expired job goes: quarantined once this crash reaches its crash limit."""
    return JobState.QUARANTINED if policies.quarantines(row["crash_attempt"] + 1, row["crash_limit"]) else JobState.AVAILABLE


def _move_reclaimed(group: list[dict[str, Any]], target: JobState, now: datetime, connection: Any) -> None:
    if not group:
        return
    ids = [r["id"] for r in group]
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE boson_job SET state = %s, crash_attempt = crash_attempt + 1, lease_holder = NULL, "
            "lease_expires_at = NULL, run_at = %s, last_error = %s "
            f"WHERE id IN ({database.placeholders(ids)}) AND {database.in_state('running')}",
            [target.value, database.dt_param(connection, now), "boson_django.errors.LeaseLost: lease expired (worker crash or stall)", *ids],
        )


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
    """Delete finished jobs whose retention has passed. Quarantined jobs never expire."""
    assert using is not None
    picked, _ = _due(using, f"state IN ({_TERMINAL_SQL})", "expires_at", limit, "id, queue, task, fence")
    transitions.swept("evicted", picked, using, state=None)
    return acks.delete_jobs([r["id"] for r in picked], using)
