"""Helpers for the section-2 suite: full row snapshots and routes into every state.

Every route goes through ``running`` where the table allows it, so the lease it hands
back is one a worker really held: refused writes are then tried with a genuine (stale)
lease, not a made-up one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection

from boson_django import conf, services
from boson_django.models import Job, JobData, QuarantinedFingerprint, Run
from boson_django.services import LeaseRef, Outcome
from boson_django.worker.notify import connect_params
from tests.factories import NOOP, admit_one, enqueue_one, state_of

LEASE_MS = 1_000
RETENTION_MS = 60_000
SNOOZE_MS = 5_000
#: Far enough to make every route's run_at due, every lease expired, every retention passed.
LONG_MS = 3_600_000


@dataclass
class Driven:
    """A job brought into a state, and the last lease issued for it (a stale one unless running)."""

    job_id: str
    lease: LeaseRef


def job_row(job_id: str) -> dict[str, Any] | None:
    return Job.objects.filter(id=job_id).values().first()


def run_rows(job_id: str) -> list[dict[str, Any]]:
    return list(Run.objects.filter(job_id=job_id).order_by("id").values())


def snapshot(job_id: str) -> dict[str, Any]:
    """Everything a transition could touch: the job row, its runs, side data, fingerprints."""
    return {
        "job": job_row(job_id),
        "runs": run_rows(job_id),
        "data": list(JobData.objects.filter(job_id=job_id).order_by("kind").values()),
        "fingerprints": list(QuarantinedFingerprint.objects.order_by("fingerprint").values()),
    }


def recorded(job_id: str) -> list[str]:
    """Outcomes of the job's attempt records, oldest first."""
    return [r.outcome for r in services.errors(job_id)]


def current_lease(job_id: str) -> LeaseRef:
    row = job_row(job_id)
    assert row is not None
    return LeaseRef(job_id, row["fence"])


def _enqueue(**fields: Any) -> str:
    fields.setdefault("queue", "walk")
    fields.setdefault("lease_ms", LEASE_MS)
    fields.setdefault("retention_ms", RETENTION_MS)
    fields.setdefault("max_attempts", 5)
    return enqueue_one(fields.pop("task", NOOP), **fields)


def start_job(**fields: Any) -> Driven:
    """Enqueue one job (walk defaults: short lease, some retention) and admit it as ``w1``."""
    job_id = _enqueue(**fields)
    unit = admit_one("w1", [fields.get("queue", "walk")])
    assert unit.lease.job_id == job_id
    return Driven(job_id, unit.lease)


def _acked(outcome: Outcome, **ack: Any):
    def route(store_clock: Any) -> Driven:
        driven = start_job()
        services.ack(driven.lease, outcome, **ack)
        return driven

    return route


def _available(store_clock: Any) -> Driven:
    driven = start_job()
    services.release(driven.lease)
    return driven


def _cancelled(store_clock: Any) -> Driven:
    driven = start_job()
    assert services.cancel(driven.job_id) is True
    return driven


def _quarantined(store_clock: Any) -> Driven:
    services.set_task_config(NOOP, crash_limit=1)
    driven = start_job()
    store_clock.advance(LEASE_MS)
    (reclaimed,) = services.reclaim_expired(10)
    assert reclaimed.state == "quarantined"
    return driven


ROUTES = {
    "scheduled": _acked(Outcome.SNOOZE, delay_ms=SNOOZE_MS),
    "available": _available,
    "running": lambda store_clock: start_job(),
    "retryable": _acked(Outcome.RETRY, delay_ms=SNOOZE_MS, error="boom"),
    "completed": _acked(Outcome.SUCCESS),
    "skipped": _acked(Outcome.SKIP),
    "failed": _acked(Outcome.DISCARD, error="bad"),
    "cancelled": _cancelled,
    "quarantined": _quarantined,
}


def drive(state: str, store_clock: Any) -> Driven:
    """Bring a fresh job into ``state`` (through ``running`` where the table allows it)."""
    driven = ROUTES[state](store_clock)
    assert state_of(driven.job_id) == state
    return driven


class listening:
    """LISTEN on ``channel`` (the wake-up channel by default) on a connection of its own;
    ``heard()`` drains the payloads that arrived (waiting up to ``wait_s`` for the first)."""

    def __init__(self, channel: str | None = None):
        self.channel = channel

    def __enter__(self):
        import psycopg

        self.conn = psycopg.connect(**connect_params(connection.settings_dict), autocommit=True)
        self.conn.execute(f'LISTEN "{self.channel or conf.get().NOTIFY_CHANNEL}"')
        return self.heard

    def heard(self, wait_s: float = 0.3) -> list[str]:
        return [n.payload for n in self.conn.notifies(timeout=wait_s)]

    def __exit__(self, *exc):
        self.conn.close()


#: SQLite's parameters per statement before 3.32 (Django 5.2 supports 3.31); 32,766 since
#: by default, and Debian's build allows 250,000, so the suite lowers it to see the limit.
OLD_SQLITE_BOUND = 999


@contextmanager
def sqlite_binding_at_most(bound: int = OLD_SQLITE_BOUND) -> Iterator[None]:
    """The store's connection binds at most ``bound`` parameters a statement inside the
    block, as a SQLite built so does; skips the test on PostgreSQL."""
    import sqlite3

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's limit on parameters per statement")
    connection.ensure_connection()
    raw = connection.connection
    before = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, bound)
    try:
        yield
    finally:
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, before)
