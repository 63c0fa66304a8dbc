"""PostgreSQL sessions: one statement as its own transaction, dedicated connections,
planner settings and timeouts.

A connection the worker *dedicates* (:func:`dedicate`) runs only this app's statements:
planner settings then hold for its whole session and each statement runs alone. With
``BOSON["PREPARED_STATEMENTS"]`` off a pooler in transaction mode may share the session,
so settings go with ``SET LOCAL`` in each transaction instead.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from boson_django import conf
from boson_django.database import fetch_dicts
from boson_django.drivers.postgresql import libpq as _libpq
from boson_django.drivers.session import Session

#: A prepare threshold no query reaches by repetition: only ``prepare=True`` prepares.
_ONLY_WHEN_ASKED = 2**31 - 1

def one_statement(
    connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, planner: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Run one statement as its own transaction (or inside the caller's, when there is
    one); its rows as dicts.

    ``planner`` settings hold for this statement only: ``SET LOCAL`` in its transaction,
    put back right after inside the caller's, or set once for the session of a dedicated
    connection. In autocommit with no settings the statement alone is the transaction and
    runs on libpq directly (:mod:`boson_django.drivers.postgresql.libpq`). With psycopg 3
    the statement is prepared once per connection unless ``BOSON["PREPARED_STATEMENTS"]``
    is False (only it: Django's own queries stay unprepared); psycopg2 gets the same
    statement in an ordinary transaction. Errors are Django's (wrapped); a failed
    statement leaves nothing written.
    """
    if not _is_psycopg3():
        with transaction.atomic(using=connection.alias), connection.cursor() as plain:
            plain.execute(sql, params)
            return fetch_dicts(plain)
    connection.ensure_connection()
    raw = connection.connection
    cursor = _statement_cursor(connection, raw)
    prepared = conf.get().PREPARED_STATEMENTS
    on_libpq = prepared and not planner and raw.autocommit and not connection.in_atomic_block
    if on_libpq:
        with connection.wrap_database_errors:  # on libpq, which prepares it itself: no threshold to set
            rows = _libpq.run(connection, cursor, sql, params)
        if rows is not None:
            return rows
    threshold = raw.prepare_threshold
    if threshold is None and prepared:
        raw.prepare_threshold = _ONLY_WHEN_ASKED  # for this statement only; Django's queries stay unprepared
    try:
        with connection.wrap_database_errors:
            if planner and raw.autocommit and not connection.in_atomic_block and _session_settings(connection, planner):
                planner = ()  # they hold for the whole session of this dedicated connection
            if connection.in_atomic_block:
                return _in_callers_transaction(raw, cursor, sql, params, planner)
            if raw.autocommit and not planner:  # autocommit: its own transaction already
                return _on_cursor(cursor, sql, params) if on_libpq else _alone(connection, cursor, sql, params)
            return _with_settings(raw, cursor, sql, params, [*planner, *_local_timeouts(connection)])
    finally:
        raw.prepare_threshold = threshold


@functools.cache
def _is_psycopg3() -> bool:
    """Whether the driver is psycopg 3 (looked up once per process)."""
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


def _statement_cursor(connection: BaseDatabaseWrapper, raw: Any) -> Any:
    """The psycopg cursor :func:`one_statement` runs on, one per database connection and
    kept: rows as dicts (names read once per result, no Column objects) and timestamps
    read by psycopg's C loader."""
    kept = getattr(connection, "boson_statement_cursor", None)
    if kept is not None and kept.connection is raw and not kept.closed:
        return kept
    import psycopg
    from psycopg.rows import dict_row
    from psycopg.types.datetime import TimestamptzLoader

    cursor = psycopg.Cursor(raw, row_factory=dict_row)
    cursor.adapters.register_loader("timestamptz", TimestamptzLoader)  # the C version when installed
    connection.boson_statement_cursor = cursor  # type: ignore[attr-defined]
    return cursor


def dedicate(connection: BaseDatabaseWrapper, timeouts: Sequence[str] = ()) -> None:
    """Mark ``connection`` (the calling thread's wrapper of an alias) as running only this
    app's statements, as the worker loop's does: :func:`one_statement` may then give it
    its planner settings for the whole session, once per connection, and run each
    statement alone -- one round trip instead of three (``BEGIN`` + ``SET LOCAL``, the
    statement, ``COMMIT``). Not with ``PREPARED_STATEMENTS`` off: that setting says a
    pooler in transaction mode may hand the session to other clients.

    ``timeouts`` (``"statement_timeout = 30000"``...) bound every statement it runs: for
    the session of each database connection it opens, or, with ``PREPARED_STATEMENTS``
    off, with ``SET LOCAL`` in each transaction the store opens on it."""
    connection.boson_dedicated = True  # type: ignore[attr-defined]
    connection.boson_timeouts = tuple(timeouts)  # type: ignore[attr-defined]
    if connection.connection is not None:
        _session_timeouts(connection)


def _session_timeouts(connection: BaseDatabaseWrapper) -> None:
    """The dedicated connection's timeouts, for its current session (direct connections only)."""
    timeouts = getattr(connection, "boson_timeouts", ())
    if timeouts and conf.get().PREPARED_STATEMENTS and connection.connection is not None:
        _session_settings(connection, timeouts)


def set_local_timeouts(connection: BaseDatabaseWrapper) -> None:
    """Set the dedicated connection's timeouts for the transaction just begun on it, when
    they are not its session's (``PREPARED_STATEMENTS`` off); otherwise nothing."""
    if local := _local_timeouts(connection):
        with connection.cursor() as cursor:
            cursor.execute("".join(f"SET LOCAL {setting}; " for setting in local))


def _local_timeouts(connection: BaseDatabaseWrapper) -> Sequence[str]:
    """The timeouts a transaction of a dedicated connection sets with ``SET LOCAL`` (those
    behind a pooler in transaction mode, where its session is not its own)."""
    if conf.get().PREPARED_STATEMENTS:
        return ()
    return getattr(connection, "boson_timeouts", ())


@receiver(connection_created, dispatch_uid="boson_django.drivers.postgresql.session.timeouts")
def _on_connected(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    if getattr(connection, "boson_dedicated", False):
        _session_timeouts(connection)


def undedicate(connection: BaseDatabaseWrapper) -> None:
    """Give ``connection`` back: the session settings :func:`one_statement` and
    :func:`dedicate` gave it are reset (the thread that ran the worker may run other code
    on it next)."""
    connection.boson_dedicated = False  # type: ignore[attr-defined]
    connection.boson_timeouts = ()  # type: ignore[attr-defined]
    applied = getattr(connection, "boson_session_settings", None)
    connection.boson_session_settings = None  # type: ignore[attr-defined]
    if applied is None or not applied[1] or applied[0] is not connection.connection or applied[0].closed:
        return  # nothing set on the database connection this wrapper has now
    applied[0].execute("; ".join(f"RESET {_name_and_value(setting)[0]}" for setting in applied[1]))


def _name_and_value(setting: str) -> tuple[str, str]:
    """``"enable_seqscan = off"`` -> ``("enable_seqscan", "off")``."""
    name, value = setting.split("=", 1)
    return name.strip(), value.strip()


def _session_settings(connection: BaseDatabaseWrapper, planner: Sequence[str]) -> bool:
    """Whether ``planner`` holds for the session of this dedicated connection (set now if
    its current database connection does not have them yet)."""
    if not getattr(connection, "boson_dedicated", False) or not conf.get().PREPARED_STATEMENTS:
        return False
    raw = connection.connection
    applied = getattr(connection, "boson_session_settings", None)
    if applied is None or applied[0] is not raw:
        applied = (raw, set())
        connection.boson_session_settings = applied  # type: ignore[attr-defined]
    missing = [setting for setting in planner if setting not in applied[1]]
    if missing:
        raw.execute("; ".join(f"SET {setting}" for setting in missing))
        applied[1].update(missing)
    return True


def _alone(connection: BaseDatabaseWrapper, cursor: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """A statement that is its own transaction: on libpq itself (:mod:`.libpq`) unless a
    parameter needs psycopg's adaptation, or ``PREPARED_STATEMENTS`` is off."""
    if conf.get().PREPARED_STATEMENTS:
        rows = _libpq.run(connection, cursor, sql, params)
        if rows is not None:
            return rows
    return _on_cursor(cursor, sql, params)


def _on_cursor(cursor: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """The statement through psycopg's cursor, prepared (inside a transaction: see :mod:`.libpq`)."""
    cursor.execute(sql, params, prepare=True)
    rows: list[dict[str, Any]] = cursor.fetchall()
    return rows


def _in_callers_transaction(raw: Any, cursor: Any, sql: str, params: Sequence[Any], planner: Sequence[str]) -> list[dict[str, Any]]:
    """The statement inside the caller's transaction, its planner settings (``SET LOCAL``)
    in force for it alone: the caller's values are put back right after, so the caller's
    own queries plan as before. An error leaves them to the rollback that must follow (a savepoint's
    rollback undoes them too)."""
    if not planner:
        return _on_cursor(cursor, sql, params)
    wanted = [_name_and_value(setting) for setting in planner]
    names = [name for name, _ in wanted]
    before = _set_local(raw, wanted, read_first=names)
    rows = _on_cursor(cursor, sql, params)
    _set_local(raw, list(zip(names, before)))
    return rows


def _set_local(raw: Any, settings: list[tuple[str, str]], read_first: Sequence[str] = ()) -> tuple[str, ...]:
    """``SET LOCAL`` each ``(name, value)`` in one round trip; with ``read_first``, the
    values those had before (read by the subquery, which runs before the settings change)."""
    sets = ", ".join(["set_config(%s, %s, true)"] * len(settings))
    reads = ", ".join(["current_setting(%s)"] * len(read_first)) or "NULL"
    row = raw.execute(f"SELECT before.*, {sets} FROM (SELECT {reads} OFFSET 0) AS before",
                      [value for pair in settings for value in pair] + list(read_first)).fetchone()
    return tuple(row[:len(read_first)])


def _with_settings(raw: Any, cursor: Any, sql: str, params: Sequence[Any], planner: Sequence[str]) -> list[dict[str, Any]]:
    """``BEGIN`` and the ``SET LOCAL`` settings go as one simple-protocol message (one
    round trip instead of one each), then the prepared statement, then ``COMMIT``. Not
    in pipeline mode: a worker hung once in a pipeline while its connection was killed."""
    settings = "".join(f"; SET LOCAL {setting}" for setting in planner)
    raw.execute(f"BEGIN{settings}")
    try:
        rows = _on_cursor(cursor, sql, params)
        raw.execute("COMMIT")
    except BaseException:
        _roll_back_quietly(raw)
        raise
    return rows


def _roll_back_quietly(raw: Any) -> None:
    """End the failed transaction if the connection still can (a broken one is closed by
    Django's error handling)."""
    try:
        if not raw.closed:
            raw.execute("ROLLBACK")
    except Exception:  # noqa: BLE001 -- the original error is the one to report
        pass




class PostgresSession(Session):
    notifies = True
    acks_inline = False
    watched = True

    def set_local_timeouts(self, connection: BaseDatabaseWrapper) -> None:
        set_local_timeouts(connection)

    def dedicate(self, connection: BaseDatabaseWrapper, timeouts: Sequence[str] = ()) -> None:
        dedicate(connection, timeouts)

    def undedicate(self, connection: BaseDatabaseWrapper) -> None:
        undedicate(connection)

    def one_statement(
        self, connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, planner: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        return one_statement(connection, sql, params, planner=planner)
