"""Proxy models: the admin's triage lists (failed, quarantined jobs) and its dashboard entry."""

from __future__ import annotations

from django.db import models

from boson_django.models.control import Queue
from boson_django.models.job import Job, JobQuerySet
from boson_django.states import JobState


class _InState(models.Manager["Job"]):
    def __init__(self, state: JobState):
        super().__init__()
        self.state = state

    def get_queryset(self) -> JobQuerySet:
        return JobQuerySet(self.model, using=self._db).filter(state=self.state.value)


class FailedJob(Job):
    """Failed jobs, as their own admin list for triage."""

    objects = _InState(JobState.FAILED)

    class Meta:
        proxy = True
        verbose_name = "failed job"
        ordering = ["-finalized_at", "-id"]


class QuarantinedJob(Job):
    """Jobs in quarantine (they crashed workers, or share such a fingerprint)."""

    objects = _InState(JobState.QUARANTINED)

    class Meta:
        proxy = True
        verbose_name = "quarantined job"
        ordering = ["-id"]


class Dashboard(Queue):
    """The admin dashboard's entry in the sidebar (a proxy: no table, no rows of its own)."""

    class Meta:
        proxy = True
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"
