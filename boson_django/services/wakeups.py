"""Waking idle workers: ``pg_notify(channel, queue)`` once work becomes available.

Whatever makes jobs available at once -- an enqueue, a sweep that promoted or reclaimed
jobs, a fired schedule, an operator's retry, release or resume, a task config or bucket
written or deleted (a cap or a limit that held jobs back may be gone) -- tells the
workers here, so an idle worker starts them now rather than at its next poll
(``POLL_INTERVAL_MS``): the workers of this process directly (an embedded worker, or a
worker whose own jobs enqueue more; on every store, SQLite included), the others by
NOTIFY. A notification is only latency: a lost one, or a store without NOTIFY (SQLite,
PgBouncer in transaction pooling mode), leaves the job to the next poll. The listening
side is :class:`boson_django.worker.notify.Listener`.

A second channel (:func:`lease_channel`) carries lease revocations: an operator's cancel
of a running job tells the worker holding it (directly when it runs in this process),
which renews its leases at once and so asks the handler to stop within milliseconds
instead of at its next heartbeat (``HEARTBEAT_MS``). Lost, that notification costs only
the same wait.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import conf, drivers

log = logging.getLogger("boson_django.worker")

#: Payload meaning "any queue" (sweeps that made work available send it).
ANY_QUEUE = "*"
#: What :func:`lease_channel` adds to the wake-up channel's name.
_LEASE_SUFFIX = "_lease"
#: PostgreSQL's longest identifier, in bytes (a longer channel name is refused).
_MAX_IDENTIFIER = 63



@dataclass(frozen=True)
class _Here:
    """A worker running in this process, as :func:`wake_here` registered it."""

    queues: frozenset[str]  # empty: every queue
    wake: Callable[[], None]
    worker_id: str | None
    on_revoked: Callable[[], None] | None

    def serves(self, queues: list[str]) -> bool:
        return not self.queues or ANY_QUEUE in queues or not self.queues.isdisjoint(queues)


#: The workers running in this process, by registration.
_local: dict[object, _Here] = {}
_local_lock = threading.Lock()


def enabled(using: str) -> bool:
    return _notifies(connections[using])


def _notifies(connection: BaseDatabaseWrapper) -> bool:
    return conf.get().NOTIFY and drivers.for_connection(connection).notifies


def channel(connection: BaseDatabaseWrapper) -> str | None:
    """The channel an enqueue's own statement on ``connection`` may NOTIFY (None: NOTIFY
    is off). Given the connection the enqueue already holds: looking it up again by alias
    cost a microsecond of a one-job enqueue."""
    return conf.get().NOTIFY_CHANNEL if _notifies(connection) else None


def wake_here(
    queues: Iterable[str], wake: Callable[[], None],
    worker_id: str | None = None, on_revoked: Callable[[], None] | None = None,
) -> Callable[[], None]:
    """Have jobs made available in this process for ``queues`` (none: every queue) call
    ``wake``, and a lease of ``worker_id`` revoked in it call ``on_revoked``, as the
    notifications would; returns the call that stops it."""
    key = object()
    with _local_lock:
        _local[key] = _Here(frozenset(queues), wake, worker_id, on_revoked)

    def forget() -> None:
        with _local_lock:
            _local.pop(key, None)

    return forget


def lease_channel(channel: str) -> str:
    """The channel of lease revocations that goes with the wake-up ``channel``: its name
    and a suffix, the name cut so that the whole stays a PostgreSQL identifier."""
    room = _MAX_IDENTIFIER - len(_LEASE_SUFFIX)
    return channel.encode()[:room].decode(errors="ignore") + _LEASE_SUFFIX


def send(payload: str, using: str, channel: str | None = None) -> None:
    """NOTIFY now (outside any transaction it is delivered at once); by default a
    queue's name on the wake-up channel."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [channel or conf.get().NOTIFY_CHANNEL, payload])


def notify_at_commit(queues: Iterable[str], using: str, *, notified: bool = False) -> None:
    """Wake idle workers of ``queues`` when the current transaction commits (never if it
    rolls back: the jobs it made available are not there); at once outside a
    transaction. ``notified``: the statement that made them available sent the NOTIFY
    itself, so only this process's workers are left to wake. ``queues`` is read only if
    someone is to be woken."""
    here, remote = bool(_local), not notified and enabled(using)
    wanted = sorted(set(queues)) if here or remote else []
    if not wanted:
        return
    if here:
        transaction.on_commit(lambda: _wake_here(wanted), using=using)
    if not remote:
        return
    for queue in wanted:
        transaction.on_commit(lambda q=queue: _send_quietly(q, using), using=using)  # type: ignore[misc]


def _here() -> list[_Here]:
    with _local_lock:
        return list(_local.values())


def _wake_here(queues: list[str]) -> None:
    for worker in _here():
        if worker.serves(queues):
            worker.wake()


def revoke_at_commit(holder: str | None, using: str) -> None:
    """Tell worker ``holder`` when the current transaction commits that a lease it holds
    was revoked, so that it renews now and learns which."""
    if not holder:
        return
    if _local:
        transaction.on_commit(lambda: _revoke_here(holder), using=using)
    if enabled(using):
        channel = lease_channel(conf.get().NOTIFY_CHANNEL)
        transaction.on_commit(lambda: _send_quietly(holder, using, channel), using=using)


def _revoke_here(holder: str) -> None:
    for worker in _here():
        if worker.worker_id == holder and worker.on_revoked is not None:
            worker.on_revoked()


def _send_quietly(payload: str, using: str, channel: str | None = None) -> None:
    try:
        send(payload, using, channel)
    except Exception:  # noqa: BLE001 -- committed; workers will see it at their next poll or heartbeat
        log.warning("boson: NOTIFY %r failed; workers will see the change at their next poll or heartbeat", payload,
                    exc_info=True)
