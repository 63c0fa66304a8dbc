"""Statements of the acks: lock the acked jobs, complete a batch, store results, delete.

What every engine writes the same way lives here; an engine overrides a statement where
it has a better one (:mod:`.postgresql.acks`: the whole plain-success batch as one
statement). The decisions -- which state, which dates -- are made by the services
(:mod:`boson_django.services.decide`); these methods only write them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers import guards
from boson_django.states import JobState, Outcome


class Completed(NamedTuple):
    """A job a plain-success batch completed (what transition records and replies need)."""

    id: str
    task: str
    queue: str
    fence: int
    attempted_at: datetime | None


#: The columns :meth:`AckStatements.lock_acked` reads, in order.
ACKED_COLUMNS = ("id", "task", "fence", "state", "lease_expires_at", "queue", "rate_class", "retention_ms",
                 "attempt", "attempted_at", "run_at")


class AckStatements:
    """The ack statements every engine shares."""

    #: Whether :meth:`complete_plain` writes a plain-success batch as one statement.
    completes_plain = False

    if TYPE_CHECKING:  # the driver's (drivers.base.Driver); not defined here, so no mixin shadows them
        def lock_rows(self) -> str: ...
        def json_cast(self) -> str: ...

    def lock_acked(self, connection: BaseDatabaseWrapper, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """Lock the acked jobs' rows by key, in id order (no deadlock between two
        batches); rows of :data:`ACKED_COLUMNS`, dates as datetimes. Locks whatever the
        state: the caller checks each lease against its row."""
        ordered = sorted(ids)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {', '.join(ACKED_COLUMNS)} FROM boson_job WHERE id IN ({database.placeholders(ordered)}) "
                f"ORDER BY id{self.lock_rows()}",
                ordered,
            )
            rows = cursor.fetchall()
        dated = {ACKED_COLUMNS.index(c) for c in ("lease_expires_at", "attempted_at", "run_at")}
        return [tuple(database.dt_value(v) if i in dated else v for i, v in enumerate(row)) for row in rows]

    def complete_plain(
        self, connection: BaseDatabaseWrapper, acks: Sequence[tuple[str, int, str | None]], retention_ms: int,
        shard: int, *, details: bool,
    ) -> tuple[dict[str, Completed | None], datetime] | None:
        """Complete, as one statement, the plain successes ``(job_id, fence, result JSON or
        None)`` whose lease still holds; None where the engine has no such statement (every
        ack then takes the general path). Leases that no longer hold are left out."""
        return None

    def complete_locked(
        self, connection: BaseDatabaseWrapper, jobs: Sequence[tuple[str, int, datetime]], now: datetime
    ) -> int:
        """running -> completed for locked, held jobs ``(id, fence, expires_at)``: the
        rows (attempt spent, lease cleared, finalized) and their open runs, two statements
        whatever the batch size. Returns how many rows were completed."""
        stamp = database.dt_param(connection, now)
        cases, params, ids = [], [], []
        for job_id, _, expires_at in jobs:
            cases.append("WHEN %s THEN %s")
            params += [job_id, database.dt_param(connection, expires_at)]
            ids.append(job_id)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE boson_job SET state = {guards.state(JobState.COMPLETED)}, attempt = attempt + 1, "
                "lease_holder = NULL, lease_expires_at = NULL, finalized_at = %s, "
                f"expires_at = CASE id {' '.join(cases)} END "
                f"WHERE id IN ({database.placeholders(ids)}) AND {guards.allowed_by_key(Outcome.SUCCESS)}",
                [stamp, *params, *ids],
            )
            done = cursor.rowcount
            found, keyed = database.by_key_and_fence("job_id", [(job_id, fence) for job_id, fence, _ in jobs])
            cursor.execute(
                f"UPDATE boson_run SET finished_at = %s, outcome = '{Outcome.SUCCESS.value}', error = '', "
                f"logs = %s{self.json_cast()}, "
                f"recorded = FALSE WHERE {found} AND {database.STILL_OPEN}",
                [stamp, "[]", *keyed],
            )
        return done

    def put_results(
        self, connection: BaseDatabaseWrapper, results: Sequence[tuple[str, int, int, Any]], now: datetime
    ) -> None:
        """Upsert ``(job_id, attempt, fence, data)`` results in one statement (the latest wins)."""
        if not results:
            return
        cast, stamp = self.json_cast(), database.dt_param(connection, now)
        row = f"(%s, 'result', %s, %s, %s, %s{cast})"
        params: list[Any] = []
        for job_id, attempt, fence, data in results:
            params += [job_id, attempt, fence, stamp, database.to_json(data)]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO boson_job_data (job_id, kind, attempt, fence, at, data) VALUES {', '.join([row] * len(results))} "
                "ON CONFLICT (job_id, kind) DO UPDATE SET attempt = excluded.attempt, fence = excluded.fence, "
                "at = excluded.at, data = excluded.data",
                params,
            )

    def delete_jobs(self, connection: BaseDatabaseWrapper, job_ids: Sequence[str]) -> int:
        """Delete jobs with their runs and side data (the row is gone: not a state), whatever
        their state: the caller decided. Returns how many job rows went."""
        if not job_ids:
            return 0
        marks = database.placeholders(job_ids)
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM boson_run WHERE job_id IN ({marks})", list(job_ids))
            cursor.execute(f"DELETE FROM boson_job_data WHERE job_id IN ({marks})", list(job_ids))
            cursor.execute(f"DELETE FROM boson_job WHERE id IN ({marks})", list(job_ids))
            return cursor.rowcount
