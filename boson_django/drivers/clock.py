"""The store clock's row as every engine reads and writes it.

``boson_clock`` holds at most one row (id 1): ``frozen_at`` stops the clock, ``offset_ms``
shifts it. Without a row the store time is the engine's own time.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database

_ROW = "SELECT frozen_at, offset_ms FROM boson_clock WHERE id = 1"
_WRITE = (
    "INSERT INTO boson_clock (id, frozen_at, offset_ms) VALUES (1, %s, %s) "
    "ON CONFLICT (id) DO UPDATE SET frozen_at = excluded.frozen_at, offset_ms = excluded.offset_ms"
)


def from_row(frozen_at: object, offset_ms: int | None, server_now: object) -> datetime:
    """Store time from the clock row and the server's time, aware UTC."""
    if frozen_at is not None:
        return database.dt_not_null(frozen_at).astimezone(timezone.utc)
    return database.dt_not_null(server_now).astimezone(timezone.utc) + timedelta(milliseconds=offset_ms or 0)


class ClockStatements:
    """The engine's clock: the host's where the engine has none of its own (SQLite)."""

    def store_now_sql(self) -> str:
        """The store time as one SQL row (column ``now``), for statements that read it inline."""
        raise NotImplementedError(f"{type(self).__name__} reads the store time in Python (now())")

    def now(self, connection: BaseDatabaseWrapper) -> datetime:
        """The store's current time on ``connection``, aware UTC."""
        frozen_at, offset_ms = self.clock_row(connection)
        return from_row(frozen_at, offset_ms, datetime.now(timezone.utc))

    def clock_row(self, connection: BaseDatabaseWrapper) -> tuple[datetime | None, int]:
        """``(frozen_at, offset_ms)`` of the clock row; ``(None, 0)`` without one."""
        with connection.cursor() as cursor:
            cursor.execute(_ROW)
            row = cursor.fetchone()
        return (database.dt_value(row[0]), row[1] or 0) if row else (None, 0)

    def write_clock(self, connection: BaseDatabaseWrapper, frozen_at: datetime | None, offset_ms: int) -> None:
        """Set the clock row (created if missing), in one statement; idempotent."""
        with connection.cursor() as cursor:
            cursor.execute(_WRITE, [database.dt_param(connection, frozen_at), offset_ms])
