"""SQLite sessions: one writer at a time, taken at ``BEGIN``; a bounded retry when busy."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import conf
from boson_django.drivers.session import Session
from boson_django.drivers.sqlite import connect


class SQLiteSession(Session):
    def connected(self, connection: BaseDatabaseWrapper) -> None:
        connect.tune(connection)

    def in_memory(self, connection: BaseDatabaseWrapper) -> bool:
        """``:memory:``, or the ``mode=memory`` URI Django's test runner gives SQLite."""
        return bool(connection.is_in_memory_db())

    def begin_immediate(self, connection: BaseDatabaseWrapper) -> AbstractContextManager[None]:
        """``BEGIN IMMEDIATE`` for the outermost transaction, so it never fails on upgrade
        from a read lock to the write lock; nothing inside the caller's transaction."""
        return _immediate(connection)

    def busy_retries(self, connection: BaseDatabaseWrapper) -> int:
        return conf.get().SQLITE_BUSY_RETRIES

    def is_busy(self, exc: BaseException) -> bool:
        text = str(exc).lower()
        return "database is locked" in text or "database table is locked" in text or "busy" in text

    def max_list(self, connection: BaseDatabaseWrapper, each: int = 1, besides: int = 0) -> int:
        """SQLite refuses a statement binding more than its build's limit ("too many SQL
        variables"): 32,766 by default since 3.32, 999 before."""
        connection.ensure_connection()
        bound = int(connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
        return max((bound - besides) // each, 1)


@contextmanager
def _immediate(connection: BaseDatabaseWrapper) -> Iterator[None]:
    if connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    previous = getattr(connection, "transaction_mode", None)
    connection.transaction_mode = "IMMEDIATE"
    try:
        yield
    finally:
        connection.transaction_mode = previous
