"""Connections and transactions: the one transaction wrapper every service uses.

What differs by engine -- row locks, ``BEGIN IMMEDIATE`` and the busy retry of SQLite,
the per-transaction timeouts of a dedicated PostgreSQL connection, how many parameters
one statement may bind -- is the engine driver's (:mod:`boson_django.drivers`). This
module is below the drivers and does not import them: the drivers package registers
itself here (:func:`use_drivers`) when it is imported, which the app does at start-up.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from typing import Any, ParamSpec, Protocol, TypeVar

from django.db import OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.dateparse import parse_datetime

from boson_django import conf

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class EngineSession(Protocol):
    """What this module asks of an engine's driver (:class:`boson_django.drivers.base.Driver`)."""

    def begin_immediate(self, connection: BaseDatabaseWrapper) -> AbstractContextManager[None]: ...
    def busy_retries(self, connection: BaseDatabaseWrapper) -> int: ...
    def is_busy(self, exc: BaseException) -> bool: ...
    def set_local_timeouts(self, connection: BaseDatabaseWrapper) -> None: ...
    def max_list(self, connection: BaseDatabaseWrapper, each: int = 1, besides: int = 0) -> int: ...
    def lock_rows(self) -> str: ...
    def lock_rows_skip_locked(self) -> str: ...


_driver_of: Callable[[BaseDatabaseWrapper], EngineSession] | None = None


def use_drivers(driver_of: Callable[[BaseDatabaseWrapper], EngineSession]) -> None:
    """Register the lookup of a connection's driver (done by :mod:`boson_django.drivers`)."""
    global _driver_of
    _driver_of = driver_of


def driver_of(connection: BaseDatabaseWrapper) -> EngineSession:
    """The driver of ``connection``'s engine, as registered by :func:`use_drivers`."""
    if _driver_of is None:
        raise RuntimeError("boson_django.drivers was not imported: is boson_django in INSTALLED_APPS?")
    return _driver_of(connection)


def alias(using: str | None) -> str:
    return using or conf.get().DATABASE


def conn(using: str | None) -> BaseDatabaseWrapper:
    return connections[alias(using)]


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
    parameters and the statement ``besides`` more (the driver's ``max_list``)."""
    return driver_of(connection).max_list(connection, each, besides)


def in_slices(values: list[T], size: int) -> Iterator[list[T]]:
    """``values`` in consecutive slices of at most ``size`` (one statement each)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def placeholders(values: Sequence[Any]) -> str:
    return ", ".join(["%s"] * len(values))


def fetch_dicts(cursor: Any) -> list[dict[str, Any]]:
    names = [col[0] for col in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def close_quietly(using: str) -> None:
    """Close this thread's connection of ``using`` after a database error; closing a
    broken connection may raise too, and that says nothing new."""
    try:
        connections[using].close()
    except Exception:  # noqa: BLE001 -- it is already broken
        pass


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
    row of it with every pair. A list of keys goes to the key's index and the pairs
    become one hashed list.
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
    driver = driver_of(cursor.db)
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


def store_transaction(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a service function as one transaction on its ``using`` alias.

    Joins the caller's transaction when there is one (as a savepoint). When it owns the
    outermost transaction it begins it as the driver says (SQLite: ``BEGIN IMMEDIATE``)
    and retries as many times as the driver allows (SQLite: ``SQLITE_BUSY_RETRIES``) on
    an error the driver calls busy ("database is locked"), with jittered backoff; nothing
    was written by a failed try.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        db = alias(kwargs.get("using"))  # type: ignore[arg-type]
        kwargs["using"] = db
        connection = connections[db]
        driver = driver_of(connection)
        owns = not connection.in_atomic_block
        retries = driver.busy_retries(connection) if owns else 0
        for attempt in range(retries + 1):
            try:
                with driver.begin_immediate(connection), transaction.atomic(using=db):
                    if owns:
                        driver.set_local_timeouts(connection)
                    return fn(*args, **kwargs)
            except OperationalError as exc:
                if attempt >= retries or not driver.is_busy(exc):
                    raise
                time.sleep(random.uniform(0, min(0.002 * 2**attempt, 0.25)))
        raise AssertionError("unreachable")

    return wrapper
