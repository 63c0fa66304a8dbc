"""Vendor differences and the one transaction wrapper every service uses.

PostgreSQL gets row locks (``FOR UPDATE``, ``SKIP LOCKED``) and ``jsonb`` casts; SQLite
gets ``BEGIN IMMEDIATE`` (one writer at a time, taken up front instead of on upgrade)
and a bounded retry when the file is locked. Nothing else in the services branches on
the vendor.
"""

from __future__ import annotations

import functools
import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, ParamSpec, TypeVar

from django.db import OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from django.utils.dateparse import parse_datetime

from boson_django import conf
from boson_django import drivers
from boson_django.drivers.postgresql import libpq as _libpq
from boson_django.states import JobState

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def alias(using: str | None) -> str:
    return using or conf.get().DATABASE


def conn(using: str | None) -> BaseDatabaseWrapper:
    return connections[alias(using)]


def is_postgres(connection: BaseDatabaseWrapper) -> bool:
    return connection.vendor == "postgresql"


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def from_json(value: Any) -> Any:
    """A JSON column as Python. Raw SQL gets text on both vendors (Django has psycopg load
    jsonb as text, for its JSONField); the job columns are decoded once per admitted job,
    so the empty values most jobs carry skip the decoder, and the rest go straight to its
    scanner (``json.loads`` wraps that in two regular-expression matches and two calls)."""
    if not isinstance(value, str):
        return value
    empty = _EMPTY_JSON.get(value)
    if empty is not None:
        return empty()
    try:
        decoded, end = _SCAN(value, 0)
    except StopIteration:
        return json.loads(value)  # raises the decoder's own error
    return decoded if end == len(value) else json.loads(value)


_EMPTY_JSON: dict[str, Callable[[], Any]] = {"[]": list, "{}": dict, "null": lambda: None}
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner json.loads uses


def dt_param(connection: BaseDatabaseWrapper, value: datetime | None) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def dt_value(value: Any) -> datetime | None:
    """A datetime read by raw SQL, made aware UTC on both vendors."""
    if value is None or isinstance(value, datetime):
        parsed = value
    else:
        parsed = parse_datetime(str(value))
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


def dt_not_null(value: Any) -> datetime:
    """:func:`dt_value` of what SQL cannot leave NULL (a NOT NULL column, the store clock)."""
    parsed = dt_value(value)
    if parsed is None:
        raise ValueError(f"a timestamp was expected, got {value!r}")
    return parsed


def most_listed(connection: BaseDatabaseWrapper, *, each: int = 1, besides: int = 0) -> int:
    """The most items one statement may list on ``connection`` when each binds ``each``
    parameters and the statement ``besides`` more: SQLite refuses a statement binding
    more than its limit ("too many SQL variables"), which is this build's own (32,766 by
    default since 3.32, 999 before; Debian's 250,000). PostgreSQL's lists here are
    arrays or far below its 65,535: no bound."""
    if connection.vendor != "sqlite":
        return 2**31 - 1
    connection.ensure_connection()
    bound = int(connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    return max((bound - besides) // each, 1)


def in_slices(values: list[T], size: int) -> Iterator[list[T]]:
    """``values`` in consecutive slices of at most ``size`` (one statement each)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def placeholders(values: Sequence[Any]) -> str:
    return ", ".join(["%s"] * len(values))


def fetch_dicts(cursor: Any) -> list[dict[str, Any]]:
    names = [col[0] for col in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


#: A prepare threshold no query reaches by repetition: only ``prepare=True`` prepares.
_ONLY_WHEN_ASKED = 2**31 - 1


def close_quietly(using: str) -> None:
    """Close this thread's connection of ``using`` after a database error; closing a
    broken connection may raise too, and that says nothing new."""
    try:
        connections[using].close()
    except Exception:  # noqa: BLE001 -- it is already broken
        pass


def one_statement(
    connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, planner: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """PostgreSQL: run one statement as its own transaction; its rows.

    The worker's hot paths are single data-modifying statements. With psycopg 3 this
    runs ``BEGIN``, the ``planner`` settings (``SET LOCAL``: they end with the
    transaction), the statement and ``COMMIT``, prepares the statement once per
    connection (no planning per call) and reads timestamps with psycopg's C loader
    (Django's is pure Python). Inside the caller's transaction it joins that, the
    settings holding for the statement alone; in autocommit with no settings the
    statement alone is the transaction (a ``BEGIN``/``COMMIT`` around it waited for more
    than it saved), and runs on libpq
    directly (:mod:`boson_django.drivers.postgresql.libpq`: ~40 us of client CPU less than
    psycopg's cursor). psycopg2 gets the same statement in an ordinary transaction.

    Django turns psycopg's preparing off (``prepare_threshold`` None) because poolers in
    transaction mode lose prepared statements; planning these statements costs more than
    running them (measured: a one-job claim 2.4 ms planned each call, 0.9 ms prepared),
    so they are prepared anyway unless ``BOSON["PREPARED_STATEMENTS"]`` is False. Only
    they are: the threshold is restored as soon as the statement has run.
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
    """Looked up once (an import statement in :func:`one_statement` cost it ~0.5 us a call)."""
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


def _statement_cursor(connection: BaseDatabaseWrapper, raw: Any) -> Any:
    """The psycopg cursor :func:`one_statement` runs on, one per database connection and
    kept: rows as dicts (names read once per result, no Column objects) and timestamps
    read by psycopg's C loader. Making it per statement cost ~20 us (a cursor and a copy
    of the connection's adapters), a twentieth of a one-job enqueue."""
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
    connection.boson_timeouts = tuple(timeouts) if is_postgres(connection) else ()  # type: ignore[attr-defined]
    if connection.connection is not None:
        _session_timeouts(connection)


def _session_timeouts(connection: BaseDatabaseWrapper) -> None:
    """The dedicated connection's timeouts, for its current session (direct connections only)."""
    timeouts = getattr(connection, "boson_timeouts", ())
    if timeouts and conf.get().PREPARED_STATEMENTS and connection.connection is not None:
        _session_settings(connection, timeouts)


def _local_timeouts(connection: BaseDatabaseWrapper) -> Sequence[str]:
    """The timeouts a transaction of a dedicated connection sets with ``SET LOCAL`` (those
    behind a pooler in transaction mode, where its session is not its own)."""
    if conf.get().PREPARED_STATEMENTS:
        return ()
    return getattr(connection, "boson_timeouts", ())


@receiver(connection_created, dispatch_uid="boson_django.database.session_timeouts")
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
    """A statement that is its own transaction: on libpq itself (:mod:`._libpq`) unless a
    parameter needs psycopg's adaptation, or ``PREPARED_STATEMENTS`` is off."""
    if conf.get().PREPARED_STATEMENTS:
        rows = _libpq.run(connection, cursor, sql, params)
        if rows is not None:
            return rows
    return _on_cursor(cursor, sql, params)


def _on_cursor(cursor: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """The statement through psycopg's cursor, prepared (inside a transaction: see :mod:`._libpq`)."""
    cursor.execute(sql, params, prepare=True)
    rows: list[dict[str, Any]] = cursor.fetchall()
    return rows


def _in_callers_transaction(raw: Any, cursor: Any, sql: str, params: Sequence[Any], planner: Sequence[str]) -> list[dict[str, Any]]:
    """The statement inside the caller's transaction, its planner settings (``SET LOCAL``)
    in force for it alone: the caller's values are put back right after, so the caller's
    own queries plan as before. Without them a claim of ten inside ``atomic`` took 5-8 ms
    against 1.1-1.4 ms alone (20,000 queued jobs, measured): a plan for a small table's
    statistics. An error leaves them to the rollback that must follow (a savepoint's
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


def in_state(state: str) -> str:
    """A WHERE test for a job's state that matches no partial index, for statements that
    find their jobs by key: with ``state = 'running'`` (or ``'available'``) beside the
    keys, the planner -- its statistics of a queue table often stale, "none running" --
    walked the partial index of that state and filtered every job in it for the keys."""
    return f"state || '' = '{JobState(state).value}'"


#: An open run, written so that no index matches it: with ``finished_at IS NULL`` beside
#: runs found by job, the planner (statistics often stale: "no open run") walked the
#: ``finished_at`` index over every open run instead of looking the jobs up.
STILL_OPEN = "COALESCE(finished_at IS NULL, FALSE)"


def by_key_and_fence(key: str, pairs: Sequence[tuple[str, int]]) -> tuple[str, list[Any]]:
    """A WHERE fragment matching the rows whose ``(key, fence)`` is one of ``pairs``, and
    its parameters: ``key IN (...) AND key || '/' || fence IN (...)``.

    ``(key, fence) IN (VALUES ...)`` is joined pair by pair, and the planner, whose
    statistics of queue tables are often stale, drives that join from whatever index it
    believes small -- the running jobs' partial indexes, the open runs -- comparing every
    row of it with every pair (256 pairs: ~11 ms against ~3 ms by key, measured). A list
    of keys goes to the key's index and the pairs become one hashed list.
    """
    keys = sorted({k for k, _ in pairs})
    tags = [f"{k}/{fence}" for k, fence in pairs]  # unambiguous: a fence has no '/'
    fragment = f"{key} IN ({placeholders(keys)}) AND {key} || '/' || fence IN ({placeholders(tags)})"
    return fragment, [*keys, *tags]


def lock_by_key(
    cursor: Any, table: str, key: str, columns: str, keys: Sequence[str], *, wait: bool, where: str = ""
) -> tuple[list[tuple[Any, ...]], set[str]]:
    """Lock the rows of ``table`` whose ``key`` is in ``keys``, in key order (no lock-order
    cycles); returns ``(rows, busy)``, each row starting with its key.

    ``wait=False`` skips rows another transaction holds (PostgreSQL ``SKIP LOCKED``) and
    reports their keys as busy: a caller already holding locks must not wait for more.
    """
    connection = cursor.db
    driver = drivers.for_connection(connection)
    lock = driver.lock_rows() if wait else driver.lock_rows_skip_locked()
    scope = f"{where} AND " if where else ""
    cursor.execute(
        f"SELECT {key}, {columns} FROM {table} WHERE {scope}{key} IN ({placeholders(keys)}) "
        f"ORDER BY {key}{lock}",
        list(keys),
    )
    rows = list(cursor.fetchall())
    got = {row[0] for row in rows}
    missing = [k for k in keys if k not in got]
    if wait or not missing:
        return rows, set()
    cursor.execute(f"SELECT {key} FROM {table} WHERE {scope}{key} IN ({placeholders(missing)})", missing)
    return rows, {row[0] for row in cursor.fetchall()}


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text or "busy" in text


@contextmanager
def _immediate(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """Make SQLite take the write lock at BEGIN, so a transaction never fails on upgrade."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    previous = getattr(connection, "transaction_mode", None)
    connection.transaction_mode = "IMMEDIATE"
    try:
        yield
    finally:
        connection.transaction_mode = previous


def store_transaction(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a service function as one transaction on its ``using`` alias.

    Joins the caller's transaction when there is one (as a savepoint). When it owns the
    outermost transaction on SQLite it retries a bounded number of times on
    "database is locked", with jittered backoff; nothing was written by a failed try.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        db = alias(kwargs.get("using"))  # type: ignore[arg-type]
        kwargs["using"] = db
        connection = connections[db]
        owns = not connection.in_atomic_block
        retries = conf.get().SQLITE_BUSY_RETRIES if connection.vendor == "sqlite" and owns else 0
        for attempt in range(retries + 1):
            try:
                with _immediate(connection), transaction.atomic(using=db):
                    if owns and (local := _local_timeouts(connection)):
                        with connection.cursor() as cursor:
                            cursor.execute("".join(f"SET LOCAL {setting}; " for setting in local))
                    return fn(*args, **kwargs)
            except OperationalError as exc:
                if attempt >= retries or not _is_lock_error(exc):
                    raise
                time.sleep(random.uniform(0, min(0.002 * 2**attempt, 0.25)))
        raise AssertionError("unreachable")

    return wrapper
