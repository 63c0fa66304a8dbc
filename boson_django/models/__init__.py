"""The store's tables. Models hold data and named querysets; only services change state."""

from boson_django.models.clock import StoreClock
from boson_django.models.control import Bucket, Duty, QuarantinedFingerprint, Queue, TaskConfig
from boson_django.models.job import Job, JobQuerySet, Lease
from boson_django.models.run import JobData, Run
from boson_django.models.schedule import ScheduleSlot, StoredSchedule
from boson_django.models.stats import ThroughputMinute
from boson_django.models.triage import Dashboard, FailedJob, QuarantinedJob

__all__ = [
    "Bucket",
    "Dashboard",
    "Duty",
    "FailedJob",
    "Job",
    "JobData",
    "JobQuerySet",
    "Lease",
    "QuarantinedFingerprint",
    "QuarantinedJob",
    "Queue",
    "Run",
    "ScheduleSlot",
    "StoreClock",
    "StoredSchedule",
    "TaskConfig",
    "ThroughputMinute",
]
