"""Wake-ups: PostgreSQL LISTEN/NOTIFY with a poll fallback, or polling alone.

Sending side: :mod:`boson_django.services.wakeups` (``pg_notify(channel, queue)`` once
the transaction that made jobs available commits). Worker side: a :class:`Listener`
thread holds a dedicated psycopg connection (outside Django's pool) that LISTENs and
sets the worker's :class:`Waker`. The worker also wakes every
``POLL_INTERVAL_MS`` regardless, so a lost notification, a dropped listener connection
or a deployment without NOTIFY (PgBouncer in transaction pooling mode, SQLite) only
costs latency. Poll-only mode is the same worker with no listener.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections

from boson_django import conf
from boson_django.services.wakeups import ANY_QUEUE, lease_channel
from boson_django.worker import network
from boson_django.worker.reconnect import Reconnect
from boson_django.worker.watchdog import break_connection
from boson_django.worker.shutdown import SignalSafeEvent

log = logging.getLogger("boson_django.worker")

#: OPTIONS keys that configure Django's connection, not libpq.
_DJANGO_ONLY = {"isolation_level", "server_side_binding", "assume_role", "pool", "cursor_factory", "context", "prepare_threshold"}


class Waker:
    """What the worker loop sleeps on: set by notifications, finished jobs and signals
    (a signal handler sets it on the loop's own thread: :class:`SignalSafeEvent`)."""

    def __init__(self) -> None:
        self._event = SignalSafeEvent()

    def set(self) -> None:
        self._event.set()

    def wait(self, timeout: float) -> bool:
        return self._event.wait(max(timeout, 0.0), clear=True)


def connect_params(settings_dict: dict[str, Any]) -> dict[str, Any]:
    """libpq parameters of a Django PostgreSQL database, for a connection of our own."""
    params: dict[str, Any] = {"dbname": settings_dict.get("NAME") or "postgres"}
    for key, name in (("USER", "user"), ("PASSWORD", "password"), ("HOST", "host"), ("PORT", "port")):
        if settings_dict.get(key):
            params[name] = settings_dict[key]
    params.update({k: v for k, v in (settings_dict.get("OPTIONS") or {}).items() if k not in _DJANGO_ONLY})
    return params


class Listener:
    """LISTEN on a dedicated connection in a daemon thread; reconnects with backoff.

    Two channels: the wake-up channel (a queue's name, or ``*``: wake the loop) and its
    lease channel (a worker id: ``on_revoked`` is called when it is this worker's).
    """

    def __init__(
        self, waker: Waker, using: str, queues: Sequence[str], channel: str | None = None,
        worker_id: str | None = None, on_revoked: Callable[[], None] | None = None,
    ):
        self.waker = waker
        self.queues = set(queues)
        self.channel = channel or conf.get().NOTIFY_CHANNEL
        self.lease_channel = lease_channel(self.channel)
        self.worker_id = worker_id
        self.on_revoked = on_revoked
        self.params = connect_params(network.with_options(connections[using].settings_dict))
        self._conn: Any = None
        self._dropped = False  # by ``reconnect``: not a failure to report
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="boson-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def reconnect(self) -> None:
        """Drop the connection and listen on a new one: after an outage, the old one may
        be half-open (no error ever comes from a connection nothing is sent on)."""
        conn = self._conn
        if conn is not None:
            self._dropped = True
            break_connection(conn)

    def serves_queue(self, payload: str) -> bool:
        """Whether a NOTIFY naming queue ``payload`` concerns this worker."""
        return not self.queues or payload == ANY_QUEUE or payload in self.queues

    def _run(self) -> None:
        reconnect = Reconnect(conf.get().RECONNECT_MAX_MS, what="LISTEN connection",  # the loop logs the traceback
                              failure="LISTEN connection failed (polling meanwhile)", tracebacks=False)
        while not self._stop.is_set():
            try:
                self._listen(reconnect)
            except Exception as exc:  # noqa: BLE001 -- polling covers us while we reconnect
                self.connected.clear()
                if self._dropped:
                    self._dropped = False
                    continue
                self._stop.wait(reconnect.failed(exc))

    def _listen(self, reconnect: Reconnect) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(**self.params, autocommit=True) as conn:
            self._conn = conn
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            if self.on_revoked is not None:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.lease_channel)))
                self.on_revoked()  # a lease revoked while we were not listening
            self.connected.set()
            reconnect.back()
            self.waker.set()  # anything enqueued while we were not listening
            while not self._stop.is_set():
                for note in conn.notifies(timeout=0.5):
                    self._heard(note.channel, note.payload)

    def _heard(self, channel: str, payload: str) -> None:
        if channel == self.lease_channel:
            if payload == self.worker_id and self.on_revoked is not None:
                self.on_revoked()
        elif self.serves_queue(payload):
            self.waker.set()
