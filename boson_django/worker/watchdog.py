"""Break a worker connection whose answer is overdue, so that the network never hangs it.

A server that stops answering -- a half-open connection after a failover or a NAT
timeout, packets dropped without a word -- leaves a statement waiting forever: no
server-side timeout can fire, and TCP keepalives only probe an idle connection. The
worker's own threads (its loop, its ack thread) arm a :class:`Watch` around their calls
to the store with a deadline; a daemon thread shuts down the socket of a connection whose
call is still waiting past it. The waiting call then fails as a lost connection does,
and the worker reconnects as after any database error.

When the worker stops, the deadline of every call is cut to ``STOP_ALLOWANCE_S`` after
the end of the grace (or after the call began, if later): a worker whose store black-holes
every packet still exits within its grace and a few seconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import drivers

log = logging.getLogger("boson_django.worker")

#: How often the watchdog looks at the calls in flight.
PERIOD_S = 0.1
#: How long a call may wait once the worker's grace is over.
STOP_ALLOWANCE_S = 1.0


class Watch:
    """The calls of one thread on its wrapper of the store's alias."""

    __slots__ = ("connection", "deadline", "began", "dog")

    def __init__(self, dog: Watchdog, connection: BaseDatabaseWrapper):
        self.dog = dog
        self.connection = connection
        self.deadline: float | None = None
        self.began = 0.0

    def arm(self, seconds: float | None) -> None:
        """Calls from now on must be answered within ``seconds`` (None: no limit but a stop's)."""
        self.began = time.monotonic()
        self.deadline = float("inf") if seconds is None else self.began + seconds

    def disarm(self) -> None:
        self.deadline = None

    @contextlib.contextmanager
    def armed(self, seconds: float | None) -> Iterator[None]:
        self.arm(seconds)
        try:
            yield
        finally:
            self.disarm()

    def overdue(self, now: float, stop_at: float | None) -> bool:
        deadline = self.deadline
        if deadline is None:
            return False
        if stop_at is not None:
            deadline = min(deadline, max(stop_at, self.began) + STOP_ALLOWANCE_S)
        return now >= deadline


class Watchdog:
    """One thread watching every :class:`Watch` of a worker; ``stop_at`` says when the
    worker's grace ends (None while it runs)."""

    def __init__(self, stop_at: Callable[[], float | None] = lambda: None):
        self.stop_at = stop_at
        self.broken = 0
        self._watches: list[Watch] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, connection: BaseDatabaseWrapper) -> Watch:
        """A watch of the calling thread's ``connection``: a PostgreSQL one is watched,
        any other never broken (SQLite's waits are bounded by its own timeout)."""
        watch = Watch(self, connection)
        if drivers.for_connection(connection).watched:
            with self._lock:
                self._watches.append(watch)
            self._start()
        return watch

    def forget(self, watch: Watch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)

    def stop(self) -> None:
        self._done.set()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="boson-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(PERIOD_S):
            now, stop_at = time.monotonic(), self.stop_at()
            with self._lock:
                late = [w for w in self._watches if w.overdue(now, stop_at)]
            for watch in late:
                waited = now - watch.began
                watch.deadline = None  # broken once; the thread that waited arms it again
                if break_connection(watch.connection):
                    self.broken += 1
                    log.warning("boson: no answer from the database after %.1fs%s; dropping the connection", waited,
                                " (the worker is stopping)" if stop_at is not None else "")


def break_connection(connection: BaseDatabaseWrapper | Any) -> bool:
    """Shut down the socket of a Django wrapper's (or a psycopg connection's) database
    connection, from any thread: a call waiting on it fails at once, as on a connection
    the server closed. False when it has none open."""
    raw = connection.connection if hasattr(connection, "settings_dict") else connection  # a wrapper, or its proxy
    if raw is None or getattr(raw, "closed", True):
        return False
    try:
        pgconn = getattr(raw, "pgconn", None)
        fd = pgconn.socket if pgconn is not None else raw.fileno()
        dup = socket.socket(fileno=os.dup(fd))
    except Exception:  # noqa: BLE001 -- closed meanwhile: nothing left to break
        return False
    try:
        dup.shutdown(socket.SHUT_RDWR)
    except OSError:
        return False
    finally:
        dup.close()
    return True
