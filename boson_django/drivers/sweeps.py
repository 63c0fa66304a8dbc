"""Statements of the sweeps: pick the due jobs, promote, reclaim.

A sweep picks its jobs locked, skipping rows another transaction holds (where the
engine locks rows), so sweepers on many nodes never take one job twice; its writes
guard the state with the table's (:mod:`.guards`), so a job that moved meanwhile is not
matched. Evicting deletes (:meth:`~.acks.AckStatements.delete_jobs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers import guards
from boson_django.states import Event, JobState, targets


class SweepStatements:
    """The sweep statements every engine shares."""

    if TYPE_CHECKING:  # the driver's (drivers.base.Driver)
        def lock_rows_skip_locked(self) -> str: ...

    def pick_due(
        self, connection: BaseDatabaseWrapper, event: Event, deadline: str, now: datetime, limit: int, columns: str
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` jobs ``event`` may move whose ``deadline`` column is at or before
        ``now``, the longest overdue first, locked (skipping rows another transaction holds)."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {columns} FROM boson_job WHERE {guards.allowed(event)} AND {deadline} <= %s "
                f"ORDER BY {deadline} LIMIT %s{self.lock_rows_skip_locked()}",
                [database.dt_param(connection, now), limit],
            )
            return database.fetch_dicts(cursor)

    def promote(self, connection: BaseDatabaseWrapper, ids: Sequence[str]) -> int:
        """Picked scheduled/retryable jobs -> available; how many moved."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE boson_job SET state = {guards.state(JobState.AVAILABLE)} "
                f"WHERE {guards.allowed(Event.PROMOTE)} AND id IN ({database.placeholders(ids)})",
                list(ids),
            )
            return cursor.rowcount

    def reclaim(
        self, connection: BaseDatabaseWrapper, ids: Sequence[str], to: JobState, now: datetime, error: str
    ) -> int:
        """Picked running jobs whose lease expired -> ``to`` (available or quarantined): a
        crash counted, the lease cleared, due now; how many moved."""
        if to not in targets(JobState.RUNNING, Event.RECLAIM):
            raise ValueError(f"a reclaim may not move a job to {to}")
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE boson_job SET state = %s, crash_attempt = crash_attempt + 1, lease_holder = NULL, "
                "lease_expires_at = NULL, run_at = %s, last_error = %s "
                f"WHERE id IN ({database.placeholders(ids)}) AND {guards.allowed_by_key(Event.RECLAIM)}",
                [to.value, database.dt_param(connection, now), error, *ids],
            )
            return cursor.rowcount
