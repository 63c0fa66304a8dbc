"""Sessions and transactions as every engine has them; engines override what differs."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django.database import fetch_dicts

#: What :meth:`Session.max_list` answers where one statement's parameters have no bound.
UNBOUNDED = 2**31 - 1


class Session:
    """How a store transaction begins and retries, and what a dedicated connection is."""

    #: Whether the engine sends ``NOTIFY`` from a statement (:mod:`boson_django.services.wakeups`).
    notifies: bool = False
    #: Whether a worker acks on its loop's thread (one writer at a time: a separate acking
    #: connection would only wait for the loop's) rather than on an acking thread.
    acks_inline: bool = True
    #: Whether a worker's watchdog breaks a connection whose answer is overdue (an engine
    #: whose waits are bounded by its own timeout needs none).
    watched: bool = False

    def connected(self, connection: BaseDatabaseWrapper) -> None:
        """Set up a connection Django just opened (any alias of this engine)."""

    def in_memory(self, connection: BaseDatabaseWrapper) -> bool:
        """Whether ``connection``'s database lives in this process only (no other process sees it)."""
        return False

    def begin_immediate(self, connection: BaseDatabaseWrapper) -> AbstractContextManager[None]:
        """Around the outermost ``atomic`` of a store transaction: makes it take its write
        lock when it begins, where the engine would otherwise fail on upgrade."""
        return contextlib.nullcontext()

    def busy_retries(self, connection: BaseDatabaseWrapper) -> int:
        """How many times a store transaction that failed :meth:`is_busy` is tried again."""
        return 0

    def is_busy(self, exc: BaseException) -> bool:
        """Whether ``exc`` says another writer held the database (nothing was written)."""
        return False

    def set_local_timeouts(self, connection: BaseDatabaseWrapper) -> None:
        """Bound the transaction just begun on a dedicated ``connection`` (see :meth:`dedicate`)."""

    def max_list(self, connection: BaseDatabaseWrapper, each: int = 1, besides: int = 0) -> int:
        """The most items one statement may list when each binds ``each`` parameters and the
        statement ``besides`` more."""
        return UNBOUNDED

    def dedicate(self, connection: BaseDatabaseWrapper, timeouts: Sequence[str] = ()) -> None:
        """Mark ``connection`` (the calling thread's wrapper) as running only this app's
        statements, under ``timeouts`` (``"statement_timeout = 30000"``...) where the engine
        has them; :meth:`undedicate` gives it back."""
        connection.boson_dedicated = True  # type: ignore[attr-defined]
        connection.boson_timeouts = ()  # type: ignore[attr-defined]

    def undedicate(self, connection: BaseDatabaseWrapper) -> None:
        """Give back a connection :meth:`dedicate` took, with every setting it gave it reset."""
        connection.boson_dedicated = False  # type: ignore[attr-defined]
        connection.boson_timeouts = ()  # type: ignore[attr-defined]

    def one_statement(
        self, connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, planner: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Run ``sql`` as its own transaction (or in the caller's); its rows as dicts."""
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(sql, params)
            return fetch_dicts(cursor)
