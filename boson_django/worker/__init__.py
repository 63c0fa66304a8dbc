"""The worker: run admitted jobs for real. ``manage.py boson_worker`` is a thin shell
over :class:`Worker`; see :mod:`boson_django.worker.runtime` for the loop."""

from boson_django.worker.outcomes import Discard, JobInterrupted, RateLimited, Skip, Snooze, TaskTimeout
from boson_django.worker.runtime import Worker, WorkerOptions

__all__ = ["Discard", "JobInterrupted", "RateLimited", "Skip", "Snooze", "TaskTimeout", "Worker", "WorkerOptions"]
