"""The store clock: every time a transition uses comes from here.

Normally it is the database server's clock (the engine driver's: PostgreSQL
``clock_timestamp()``; for SQLite, an embedded database, the host clock). ``freeze``/
``advance``/``unfreeze`` write one row, so a frozen clock is seen by every process that
uses the database, workers in subprocesses included.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from boson_django import database, drivers
from boson_django.drivers.clock import from_row

__all__ = ["advance", "freeze", "from_row", "now", "unfreeze"]


def now(using: str | None = None) -> datetime:
    """The store's current time, aware UTC."""
    connection = database.conn(using)
    return drivers.for_connection(connection).now(connection)


def _state(using: str | None) -> tuple[datetime | None, int]:
    connection = database.conn(using)
    return drivers.for_connection(connection).clock_row(connection)


def _write(frozen_at: datetime | None, offset_ms: int, using: str | None) -> None:
    connection = database.conn(using)
    drivers.for_connection(connection).write_clock(connection, frozen_at, offset_ms)


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
