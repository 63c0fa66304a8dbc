"""The store clock: every time a transition uses comes from here.

Normally it is the database server's clock (PostgreSQL ``clock_timestamp()``; for
SQLite, an embedded database, the host clock). ``freeze``/``advance``/``unfreeze``
write one row, so a frozen clock is seen by every process that uses the database,
workers in subprocesses included.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from boson_django import database

#: The store time as one SQL row (column ``now``), for statements that read it inline
#: instead of paying a round trip of their own.
PG_NOW = (
    "SELECT COALESCE(c.frozen_at, clock_timestamp() + COALESCE(c.offset_ms, 0) * INTERVAL '1 millisecond') AS now "
    "FROM (SELECT 1) AS one LEFT JOIN boson_clock c ON c.id = 1"
)
_SQLITE_NOW = "SELECT frozen_at, offset_ms FROM boson_clock WHERE id = 1"


def now(using: str | None = None) -> datetime:
    """The store's current time, aware UTC (whatever the PostgreSQL session's zone)."""
    connection = database.conn(using)
    with connection.cursor() as cursor:
        if database.is_postgres(connection):
            cursor.execute(PG_NOW)
            return database.dt_not_null(cursor.fetchone()[0]).astimezone(timezone.utc)
        cursor.execute(_SQLITE_NOW)
        row = cursor.fetchone()
    frozen_at, offset_ms = row if row else (None, 0)
    return from_row(frozen_at, offset_ms, datetime.now(timezone.utc))


def from_row(frozen_at: object, offset_ms: int | None, server_now: object) -> datetime:
    """Store time from the clock row and the server's time (for queries that read them along
    with other things, saving a round trip)."""
    if frozen_at is not None:
        return database.dt_not_null(frozen_at).astimezone(timezone.utc)
    return database.dt_not_null(server_now).astimezone(timezone.utc) + timedelta(milliseconds=offset_ms or 0)


def _state(using: str | None) -> tuple[datetime | None, int]:
    from boson_django.models import StoreClock

    row = StoreClock.objects.using(database.alias(using)).filter(id=1).first()
    return (row.frozen_at, row.offset_ms) if row else (None, 0)


def _write(frozen_at: datetime | None, offset_ms: int, using: str | None) -> None:
    from boson_django.models import StoreClock

    StoreClock.objects.using(database.alias(using)).update_or_create(
        id=1, defaults={"frozen_at": frozen_at, "offset_ms": offset_ms}
    )


def freeze(at: datetime | None = None, using: str | None = None) -> datetime:
    """Stop the store clock at ``at`` (default: the current store time)."""
    if at is None:
        at = now(using)
    if at.tzinfo is None:
        raise ValueError("freeze(at): at must be an aware datetime")
    _write(at, 0, using)
    return at


def advance(ms: int | float, using: str | None = None) -> datetime:
    """Step the clock forward ``ms`` milliseconds, frozen or not."""
    if ms < 0 or ms != ms or ms == float("inf"):
        raise ValueError(f"advance(ms): ms must be a finite number >= 0, got {ms!r}")
    frozen_at, offset_ms = _state(using)
    if frozen_at is not None:
        _write(frozen_at + timedelta(milliseconds=ms), 0, using)
    else:
        _write(None, offset_ms + int(ms), using)
    return now(using)


def unfreeze(using: str | None = None) -> None:
    """Back to the server's own clock, with no offset."""
    _write(None, 0, using)
