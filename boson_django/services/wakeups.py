"""Waking idle workers: ``pg_notify(channel, queue)`` once work becomes available.

Whatever makes jobs available at once -- an enqueue, a sweep that promoted or reclaimed
jobs, a fired schedule, an operator's retry, release or resume -- tells the workers
here, so an idle worker starts them now rather than at its next poll
(``POLL_INTERVAL_MS``). A notification is only latency: a lost one, or a store without
NOTIFY (SQLite, PgBouncer in transaction pooling mode), leaves the job to the next poll.
The listening side is :class:`boson_django.worker.notify.Listener`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import connections, transaction

from boson_django import conf

log = logging.getLogger("boson_django.worker")

#: Payload meaning "any queue" (sweeps that made work available send it).
ANY_QUEUE = "*"


def enabled(using: str) -> bool:
    return conf.get().NOTIFY and connections[using].vendor == "postgresql"


def send(queue: str, using: str) -> None:
    """NOTIFY now (outside any transaction it is delivered at once)."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [conf.get().NOTIFY_CHANNEL, queue])


def notify_at_commit(queues: Iterable[str], using: str) -> None:
    """Wake idle workers of ``queues`` when the current transaction commits (never if it
    rolls back: the jobs it made available are not there)."""
    if not enabled(using):
        return
    for queue in sorted(set(queues)):
        transaction.on_commit(lambda q=queue: _send_quietly(q, using), using=using)  # type: ignore[misc]


def _send_quietly(queue: str, using: str) -> None:
    try:
        send(queue, using)
    except Exception:  # noqa: BLE001 -- the jobs are committed; workers will poll them up
        log.warning("boson: NOTIFY for queue %r failed; workers will find the jobs by polling", queue, exc_info=True)
