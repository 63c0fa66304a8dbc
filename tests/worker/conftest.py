"""Worker tests run jobs on other threads and processes, so the store must be committed:
they use ``live_clock`` (transactional database, store clock frozen at 2030-01-01)."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command

from boson_django import services


def burst(*args: str) -> None:
    """``manage.py boson_worker --burst`` in this process."""
    call_command("boson_worker", "--burst", "--concurrency", "2", *args)


def state(job_id: str) -> str | None:
    found = services.job_state(job_id)
    return None if found is None else found[1]


def job(job_id: str) -> Any:
    from boson_django.models import Job

    return Job.objects.get(id=job_id)
