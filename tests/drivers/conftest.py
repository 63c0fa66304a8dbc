"""The driver conformance suite: the same does / does-not pairs against whichever engine
the lane runs (``BOSON_TEST_DB``). A new engine's driver passes this directory unchanged.

Statements the driver owns are called through :func:`boson_django.drivers.for_alias`;
transitions whose decision is the services' are driven through the public services, so
the engine's statements run under them. Time moves on the store clock only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from boson_django import database, drivers, services
from boson_django.drivers.base import Driver
from boson_django.models import Job, Run
from tests.factories import enqueue_one

#: The lease every job of this suite is admitted with.
LEASE_MS = 10_000


@pytest.fixture
def driver() -> Driver:
    """The driver of the lane's engine."""
    return drivers.for_alias(None)


@pytest.fixture
def conn() -> Any:
    return database.conn(None)


@pytest.fixture
def running(store_clock) -> Callable[..., services.LeaseRef]:
    """Make a running job (its own queue, admitted with :data:`LEASE_MS`); its lease."""
    made = iter(range(1_000_000))

    def make(**fields: Any) -> services.LeaseRef:
        queue = fields.pop("queue", f"conf-{next(made)}")
        enqueue_one(queue=queue, **fields)
        (unit,) = services.admit("w1", [queue], 1, lease_ms=LEASE_MS)
        return unit.lease

    return make


def row(job_id: str) -> dict[str, Any] | None:
    return Job.objects.filter(id=job_id).values().first()


def open_runs(job_id: str) -> int:
    return Run.objects.filter(job_id=job_id, finished_at__isnull=True).count()


def expire(store_clock: Any) -> None:
    """Move the store clock past every lease of this suite."""
    store_clock.advance(LEASE_MS + 1)


def later(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)
