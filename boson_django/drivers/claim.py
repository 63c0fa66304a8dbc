"""Claiming jobs as every engine does it: candidates in claim order, then one UPDATE.

The decision (buckets, ``max_active`` caps, rounds) is
:func:`boson_django.services.admission.admit`'s; these are its statements. An engine may
also claim the jobs that need no bucket or cap in one statement (:meth:`claim_free`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers import guards
from boson_django.states import Event, JobState

#: What an admission reads back of each job it claims: the envelope and the lease.
JOB_COLUMNS = (
    "id, task, queue, priority, args, kwargs, meta, unique_key, fingerprint, weight, "
    "rate_class, max_attempts, retention_ms, lease_ms, timeout_ms, attempt, "
    "crash_attempt, fence, lease_expires_at, checkpoint, run_at"
)


def first_run(job: str) -> str:
    """Whether the job ``job`` names (a table or alias) has no run yet, as a returned column.

    A scalar lookup rather than ``NOT EXISTS``: PostgreSQL may plan an ``EXISTS`` as a
    hashed subplan that reads the whole run table (and keeps that plan for a prepared
    statement); ``LIMIT 1`` has no hashed form, so it is one probe of
    ``boson_run_job_fence`` per claimed job. Every claim statement uses it, so they agree
    on what a first run is.
    """
    return f"(SELECT 1 FROM boson_run r WHERE r.job_id = {job}.id LIMIT 1) IS NULL AS first_run"


#: Returned with each claimed row besides the envelope: times, and whether the job had runs.
CLAIM_EXTRA = f"enqueued_at, started_at, attempted_at, {first_run('boson_job')}"


class FreeClaim(NamedTuple):
    """What :meth:`ClaimStatements.claim_free` claimed."""

    rows: list[dict[str, Any]]  #: the claimed jobs (runs opened), in no order
    held: int  #: candidates among the first ``limit`` that need a bucket or a cap
    now: Any  #: the store time of the claim


class ClaimStatements:
    """The general claim: every engine can run it inside a store transaction."""

    def claim_free(
        self, connection: BaseDatabaseWrapper, worker_id: str, queues: Sequence[str], limit: int, lease_ms: int | None
    ) -> FreeClaim | None:
        """Claim, as one statement that is its own transaction (or joins the caller's), up
        to ``limit`` available jobs of ``queues`` (empty: every queue) that need no bucket
        or cap; None where the engine has no such statement (the general path claims all)."""
        return None

    def claim_candidates(
        self, connection: BaseDatabaseWrapper, queues: Sequence[str], blocked_classes: set[str],
        blocked_tasks: set[str], taken: Sequence[str], need: int,
    ) -> list[dict[str, Any]]:
        """Up to ``need`` available jobs of ``queues`` (empty: every queue) in claim order
        (priority, then ``run_at``, then id), locked where the engine locks rows (skipping
        those another transaction holds); paused queues' jobs, ``blocked_classes``,
        ``blocked_tasks`` and the ids ``taken`` are left out. Rows: id, task, rate_class,
        weight, lease_ms."""
        where = [guards.allowed(Event.ADMIT), "queue NOT IN (SELECT name FROM boson_queue WHERE paused)"]
        params: list[Any] = []
        if queues:
            where.append(f"queue IN ({database.placeholders(queues)})")
            params += queues
        if blocked_classes:
            classes = sorted(blocked_classes)
            where.append(f"(rate_class IS NULL OR rate_class NOT IN ({database.placeholders(classes)}))")
            params += classes
        if blocked_tasks:
            tasks = sorted(blocked_tasks)
            where.append(f"task NOT IN ({database.placeholders(tasks)})")
            params += tasks
        if taken:
            where.append(f"id NOT IN ({database.placeholders(taken)})")
            params += taken
        sql = (
            "SELECT id, task, rate_class, weight, lease_ms FROM boson_job "
            f"WHERE {' AND '.join(where)} ORDER BY priority DESC, run_at, id LIMIT %s"
            f"{self.lock_rows_skip_locked()}"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params + [need])
            return database.fetch_dicts(cursor)

    def claim_picked(
        self, connection: BaseDatabaseWrapper, picked: Sequence[dict[str, Any]], worker_id: str,
        now: datetime, lease_ms: int | None,
    ) -> list[dict[str, Any]]:
        """Claim the ``picked`` candidates (each with its ``charged`` weight) for
        ``worker_id`` at ``now``, in one UPDATE: running, fence raised by one, lease set.
        Only rows still ``available`` change; the rows (:data:`JOB_COLUMNS` and
        :data:`CLAIM_EXTRA`) come back in ``picked``'s order. Runs are not opened here."""
        expiry_cases, charge_cases, params_e, params_c, ids = [], [], [], [], []
        for cand in picked:
            expires = now + timedelta(milliseconds=lease_ms or cand["lease_ms"])
            expiry_cases.append("WHEN %s THEN %s")
            params_e += [cand["id"], database.dt_param(connection, expires)]
            charge_cases.append("WHEN %s THEN %s")
            params_c += [cand["id"], cand["charged"]]
            ids.append(cand["id"])
        stamp = database.dt_param(connection, now)
        sql = (
            f"UPDATE boson_job SET state = {guards.state(JobState.RUNNING)}, fence = fence + 1, lease_holder = %s, "
            f"lease_expires_at = CASE id {' '.join(expiry_cases)} END, "
            f"charged_weight = CASE id {' '.join(charge_cases)} END, "
            "started_at = COALESCE(started_at, %s), attempted_at = %s "
            f"WHERE id IN ({database.placeholders(ids)}) AND {guards.allowed_by_key(Event.ADMIT)} "
            f"RETURNING {JOB_COLUMNS}, {CLAIM_EXTRA}"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [worker_id, *params_e, *params_c, stamp, stamp, *ids])
            rows = database.fetch_dicts(cursor)
        order = {job_id: i for i, job_id in enumerate(ids)}
        rows.sort(key=lambda r: order[r["id"]])
        return rows

    if TYPE_CHECKING:  # the driver's other concerns

        def lock_rows_skip_locked(self) -> str: ...
