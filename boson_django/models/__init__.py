"""The store's tables. Models hold data and named querysets; only services change state."""

from boson_django.models.clock import StoreClock
from boson_django.models.control import Bucket, Duty, QuarantinedFingerprint, Queue, TaskConfig
from boson_django.models.job import Job, JobQuerySet, Lease
from boson_django.models.run import JobData, Run

__all__ = [
    "Bucket",
    "Duty",
    "Job",
    "JobData",
    "JobQuerySet",
    "Lease",
    "QuarantinedFingerprint",
    "Queue",
    "Run",
    "StoreClock",
    "TaskConfig",
]
