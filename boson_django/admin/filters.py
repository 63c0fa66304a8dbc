"""List filters whose choices cost no scan of the job table (no DISTINCT over jobs)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from boson_django import registry
from boson_django.models import Job, Queue, TaskConfig
from boson_django.states import JobState

MAX_CHOICES = 200


class _ExactFilter(admin.SimpleListFilter):
    """Filter on one indexed column; choices come from a small table, not from the jobs."""

    column = ""

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(**{self.column: value}) if value else queryset

    def choices_with_current(self, names: list[str]) -> list[tuple[str, str]]:
        current = self.value()
        if current and current not in names:
            names = [current, *names]
        return [(name, name) for name in names[:MAX_CHOICES]]


class QueueFilter(_ExactFilter):
    title = "queue"
    parameter_name = "queue"
    column = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return self.choices_with_current(list(Queue.objects.values_list("name", flat=True)[:MAX_CHOICES]))


class TaskFilter(_ExactFilter):
    title = "task"
    parameter_name = "task"
    column = "task"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = set(registry.names()) | set(TaskConfig.objects.values_list("task", flat=True)[:MAX_CHOICES])
        return self.choices_with_current(sorted(names))


class OutcomeFilter(admin.SimpleListFilter):
    """Run outcomes: the ack outcomes plus the records of events that ran no handler."""

    title = "outcome"
    parameter_name = "outcome"
    OUTCOMES = (
        "success", "retry", "snooze", "rate_limited", "skip", "undecodable", "discard",
        "lease_lost", "released", "cancelled", "retried", "unquarantined", "quarantined",
    )

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("open", "(still running)"), *[(o, o) for o in self.OUTCOMES]]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value == "open":
            # Open runs belong to running jobs: found through those (few, and indexed),
            # since no index of the run table covers finished_at (its close stays HOT).
            running = Job.objects.filter(state=JobState.RUNNING.value).values("id")
            return queryset.filter(finished_at__isnull=True, job_id__in=running)
        return queryset.filter(outcome=value) if value else queryset
