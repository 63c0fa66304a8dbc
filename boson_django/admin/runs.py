"""Runs: every attempt of every job, read-only, newest first."""

from __future__ import annotations

from django.contrib import admin
from django.db.models.functions import Substr

from boson_django.admin import display
from boson_django.admin.base import ReadOnlyAdmin
from boson_django.admin.filters import OutcomeFilter, QueueFilter
from boson_django.admin.jobs import ERROR_HEAD
from boson_django.models import Run


class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "job_link", "task", "queue", "attempt", "fence", "worker_id", "started_at", "finished_at", "duration", "outcome", "recorded",
                    "error_head_display")
    list_filter = (OutcomeFilter, QueueFilter, "recorded")
    #: A task's page links to its runs of the last 24 hours (``boson_run_task_started``).
    linked_lookups = ("task", "started_at__gte")
    search_fields = ("=job__id",)
    search_help_text = "Exact job id."
    ordering = ("-id",)
    sortable_by = ("id",)
    show_facets = admin.ShowFacets.NEVER
    readonly_fields = ("job_link", "started", "finished", "error_pre", "logs_pre")
    fields = ("job_link", "task", "queue", "attempt", "fence", "worker_id", "started", "finished", "outcome", "recorded", "error_pre", "logs_pre")

    def get_queryset(self, request):  # type: ignore[no-untyped-def]
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("_changelist"):
            qs = qs.defer("error", "logs").annotate(error_head=Substr("error", 1, ERROR_HEAD))
        return qs

    @admin.display(description="duration")
    def duration(self, obj: Run) -> str:
        return "—" if obj.finished_at is None else display.duration(obj.finished_at - obj.started_at)

    @admin.display(description="error")
    def error_head_display(self, obj: Run) -> str:
        return display.first_line(getattr(obj, "error_head", None))

    @admin.display(description="job")
    def job_link(self, obj: Run) -> str:
        return display.job_link(obj.job_id)

    @admin.display(description="started at")
    def started(self, obj: Run) -> str:
        return display.when(obj.started_at)

    @admin.display(description="finished at")
    def finished(self, obj: Run) -> str:
        return display.when(obj.finished_at)

    @admin.display(description="error")
    def error_pre(self, obj: Run) -> str:
        return display.pre(obj.error)

    @admin.display(description="log lines")
    def logs_pre(self, obj: Run) -> str:
        return display.pre("\n".join(str(line) for line in obj.logs or []))


admin.site.register(Run, RunAdmin)
