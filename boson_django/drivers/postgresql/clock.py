"""PostgreSQL's store clock: ``clock_timestamp()`` shifted by the clock row, read inline."""

from __future__ import annotations

from datetime import datetime, timezone

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers.clock import ClockStatements

#: The store time as one SQL row (column ``now``).
STORE_NOW = (
    "SELECT COALESCE(c.frozen_at, clock_timestamp() + COALESCE(c.offset_ms, 0) * INTERVAL '1 millisecond') AS now "
    "FROM (SELECT 1) AS one LEFT JOIN boson_clock c ON c.id = 1"
)


class PostgresClock(ClockStatements):
    def store_now_sql(self) -> str:
        return STORE_NOW

    def now(self, connection: BaseDatabaseWrapper) -> datetime:
        """The server's clock, whatever the session's time zone, as aware UTC."""
        with connection.cursor() as cursor:
            cursor.execute(STORE_NOW)
            return database.dt_not_null(cursor.fetchone()[0]).astimezone(timezone.utc)
