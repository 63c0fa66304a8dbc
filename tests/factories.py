"""Small builders so tests say what they mean: ``enqueue_one``, ``admit_one``, ``running_job``."""

from __future__ import annotations

from typing import Any

from boson_django import services
from boson_django.services import Envelope

NOOP = "tests.testapp.tasks.noop"
ADD = "tests.testapp.tasks.add"
SEND_MAIL = "tests.testapp.tasks.send_mail"
EPHEMERAL = "tests.testapp.tasks.ephemeral"


def envelope(task: str = NOOP, **fields: Any) -> Envelope:
    return Envelope(task=task, **fields)


def enqueue_one(task: str = NOOP, **fields: Any) -> str:
    (result,) = services.enqueue([envelope(task, **fields)])
    return result.id


def state_of(job_id: str) -> str | None:
    found = services.job_state(job_id)
    return None if found is None else found[1]


def admit_one(worker: str = "w1", queues: list[str] | None = None, **kwargs: Any) -> services.AdmissionUnit:
    units = services.admit(worker, queues or [], 1, **kwargs)
    assert len(units) == 1, f"expected one admission, got {units}"
    return units[0]


def running_job(task: str = NOOP, worker: str = "w1", **fields: Any) -> services.AdmissionUnit:
    """Enqueue one job on its own queue and admit it."""
    queue = fields.pop("queue", f"q-{task.rsplit('.', 1)[-1]}")
    job_id = enqueue_one(task, queue=queue, **fields)
    unit = admit_one(worker, [queue])
    assert unit.lease.job_id == job_id
    return unit
