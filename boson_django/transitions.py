"""Structured records of every transition, published once the transaction commits.

Each service that changes a job's state calls one helper here. When nobody listens --
no observer subscribed and no level set on the ``boson_django.transitions`` logger (it
is opt-in: ``"loggers": {"boson_django.transitions": {"level": "INFO", ...}}``) -- a helper returns at once and builds nothing, so the hot paths pay one function call.
Otherwise it snapshots the rows as :class:`Transition` records and hands them to
``transaction.on_commit``: a rolled-back transaction reports nothing.

Log records carry the fields as attributes (``record.job_id``, ``record.queue``,
``record.task``, ``record.fence``, ``record.event``, ``record.outcome``,
``record.state``), ready for a JSON formatter. The metrics module is an observer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

log = logging.getLogger("boson_django.transitions")

Observer = Callable[[Sequence["Transition"]], None]
_observers: list[Observer] = []


@dataclass(frozen=True, slots=True)
class Transition:
    event: str  # enqueued, admitted, acked, released, promoted, reclaimed, cancelled, retried, unquarantined, evicted
    job_id: str
    queue: str
    task: str
    fence: int
    outcome: str | None = None  # the ack's outcome, or why (lease_lost, cancelled, ...)
    state: str | None = None  # the state after; None when the row was deleted
    duration_s: float | None = None  # acked: how long the attempt ran
    wait_s: float | None = None  # admitted: how long the job waited after it was due


def subscribe(observer: Observer) -> None:
    if observer not in _observers:
        _observers.append(observer)


def unsubscribe(observer: Observer) -> None:
    if observer in _observers:
        _observers.remove(observer)


def active() -> bool:
    """Someone listens: an observer, or the logger was given a level (opt-in, see docs/metrics.md)."""
    return bool(_observers) or (log.level != logging.NOTSET and log.isEnabledFor(logging.INFO))


def emit(records: Sequence[Transition], using: str) -> None:
    if records:
        transaction.on_commit(lambda: publish(records), using=using)


def publish(records: Sequence[Transition]) -> None:
    if log.level != logging.NOTSET and log.isEnabledFor(logging.INFO):
        for r in records:
            log.info("%s job %s (%s, queue %s, fence %d) -> %s%s", r.event, r.job_id, r.task, r.queue, r.fence,
                     r.state or "deleted", f" [{r.outcome}]" if r.outcome else "", extra=asdict(r))
    for observer in list(_observers):
        try:
            observer(records)
        except Exception:  # noqa: BLE001 -- an observer never breaks a committed transition
            log.warning("boson: transition observer %r failed", observer, exc_info=True)


def _seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    return None if later is None or earlier is None else max((later - earlier).total_seconds(), 0.0)


# -- one helper per call site: each returns at once when nobody listens ------------------

def enqueued(rows: Iterable[dict[str, Any]], results: Iterable[Any], using: str) -> None:
    if active():
        emit([Transition("enqueued", res.id, v["queue"], v["task"], 0, state=v["state"])
              for v, res in zip(rows, results) if res.disposition == "created"], using)


def admitted(units: Sequence[Any], now: datetime, using: str) -> None:
    if active():
        emit([Transition("admitted", u.lease.job_id, u.envelope.queue or "", u.envelope.task, u.lease.fence,
                         state="running", wait_s=_seconds(now, u.envelope.run_at)) for u in units], using)


def acked(jobs: Iterable[tuple[Any, Any, Any]], now: datetime, using: str) -> None:
    """``(job, outcome, new state or None)`` of each ack."""
    if active():  # getattr: batched acks may hand over a slimmer row than a Job
        emit([Transition("acked", job.id, getattr(job, "queue", ""), getattr(job, "task", ""), job.fence,
                         outcome=str(getattr(outcome, "value", outcome)), state=getattr(state, "value", state),
                         duration_s=_seconds(now, getattr(job, "attempted_at", None)))
              for job, outcome, state in jobs], using)


def swept(event: str, rows: Iterable[dict[str, Any]], using: str, *, state: str | None, outcome: str | None = None) -> None:
    """Rows a sweep moved (``id``, ``queue``, ``task``, optional ``fence``/``state``)."""
    if active():
        emit([Transition(event, r["id"], r.get("queue") or "", r.get("task") or "", r.get("fence") or 0,
                         outcome=outcome, state=r.get("to", state)) for r in rows], using)


def controlled(event: str, jobs: Iterable[Any], using: str, *, outcome: str | None = None) -> None:
    """Transitions of locked Job rows outside acks and sweeps: an operator's (cancel, retry,
    release from quarantine) and a worker's hand-back on shutdown; ``state`` is read from each."""
    if active():
        emit([Transition(event, j.id, j.queue, j.task, j.fence, outcome=outcome, state=j.state) for j in jobs], using)
