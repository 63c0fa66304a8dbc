"""Statements of leases: renew the leases still held, hand a job back (release).

Every statement guards the state with the table's (:mod:`.guards`) and matches the job
by key and fence, so a lease that moved on (stale fence, not running, expired on the
store clock) is simply not matched: a lost race writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers import guards
from boson_django.states import Event, JobState


class LeaseStatements:
    """The lease statements every engine shares."""

    def renew(
        self, connection: BaseDatabaseWrapper, leases: Sequence[tuple[str, int]], until: datetime, now: datetime
    ) -> set[tuple[str, int]]:
        """Extend to ``until`` the ``(job_id, fence)`` leases still held at ``now``; the ones
        extended. Idempotent: renewing again only moves ``until``."""
        found, keyed = database.by_key_and_fence("id", list(leases))
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE boson_job SET lease_expires_at = %s WHERE {found} "
                f"AND {guards.leased()} AND lease_expires_at > %s RETURNING id, fence",
                [database.dt_param(connection, until), *keyed, database.dt_param(connection, now)],
            )
            return {(row[0], row[1]) for row in cursor.fetchall()}

    def release(self, connection: BaseDatabaseWrapper, job_id: str, fence: int, now: datetime) -> int:
        """A held job back to ``available`` now: lease cleared, charge refunded (0), attempt
        kept. The caller holds the row locked with its lease checked; returns 0 or 1."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE boson_job SET state = {guards.state(JobState.AVAILABLE)}, run_at = %s, lease_holder = NULL, "
                "lease_expires_at = NULL, charged_weight = 0 "
                f"WHERE id = %s AND fence = %s AND {guards.allowed_by_key(Event.RELEASE)}",
                [database.dt_param(connection, now), job_id, fence],
            )
            return cursor.rowcount
