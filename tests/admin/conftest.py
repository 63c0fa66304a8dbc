"""Admin fixtures: three users (superuser, view-only staff, a job operator) and a store
holding a job in every state."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from boson_django import services
from boson_django.services import Outcome
from tests.factories import ADD, admit_one, enqueue_one

VIEW_MODELS = ("job", "run", "queue", "bucket", "duty", "taskconfig", "quarantinedfingerprint")


def staff_client(username: str, codenames: list[str]) -> Client:
    """A logged-in staff user holding only these boson permissions (codenames)."""
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="boson_django", codename__in=codenames))
    return _client(user)


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser_client(db) -> Client:
    return _client(User.objects.create_superuser("root", password="pw"))


@pytest.fixture
def viewer_client(db) -> Client:
    """Staff with only the view permissions of boson's models."""
    return staff_client("viewer", [f"view_{m}" for m in VIEW_MODELS])


@pytest.fixture
def operator_client(db) -> Client:
    """Can view, retry and cancel jobs; cannot release quarantine, operate queues or tune limits."""
    return staff_client("operator", [f"view_{m}" for m in VIEW_MODELS] + ["operate_job"])


@dataclass
class Store:
    scheduled: str
    available: str
    running: str
    retryable: str
    completed: str
    failed: str
    cancelled: str
    quarantined: str
    skipped: str


def make_job(state: str, queue: str = "mail", clock=None) -> str:
    """Drive one job through the services into ``state``."""
    if state == "scheduled":
        return enqueue_one(queue=queue, run_at=clock.now().replace(year=2031))
    if state == "quarantined":
        services.set_task_config(ADD, crash_limit=1)
        job_id = enqueue_one(ADD, queue=queue, lease_ms=1000, args=[1, 2])
        admit_one(queues=[queue])
        clock.advance(1001)
        services.reclaim_expired(100)
        return job_id
    job_id = enqueue_one(queue=queue, max_attempts=1 if state == "failed" else 3)
    if state == "available":
        return job_id
    unit = admit_one(queues=[queue])
    if state == "running":
        return job_id
    outcome = {"retryable": Outcome.RETRY, "completed": Outcome.SUCCESS, "failed": Outcome.RETRY, "skipped": Outcome.SKIP, "cancelled": None}[state]
    if outcome is None:
        services.cancel(job_id)
    else:
        services.ack(unit.lease, outcome, error="Traceback: boom" if outcome is Outcome.RETRY else None, logs=["line one"])
    return job_id


@pytest.fixture
def store(store_clock) -> Store:
    ids = {}
    for state in ("scheduled", "available", "running", "retryable", "completed", "failed", "cancelled", "quarantined", "skipped"):
        ids[state] = make_job(state, queue=f"q-{state}", clock=store_clock)
    return Store(**ids)
