"""Triage lists in the sidebar: failed jobs, quarantined jobs and live leases."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import DateTimeField, Value
from django.http import HttpRequest
from django.utils.html import format_html

from boson_django import clock
from boson_django.admin import display
from boson_django.admin.filters import QueueFilter, TaskFilter
from boson_django.admin.jobs import JobAdmin
from boson_django.models import FailedJob, Job, Lease, QuarantinedJob


class FailedJobAdmin(JobAdmin):
    list_display = ("id_cut", "task_cut", "queue_cut", "attempts", "finalized_at", "error_head_display")
    list_filter = (QueueFilter, TaskFilter)
    actions = ("retry_selected",)


class QuarantinedJobAdmin(JobAdmin):
    list_display = ("id_cut", "task_cut", "queue_cut", "crashes", "fingerprint_head", "error_head_display")
    list_filter = (QueueFilter, TaskFilter)
    #: Release only: the state machine has no way out of quarantine but a release.
    actions = ("release_selected",)

    @admin.display(description="crashes")
    def crashes(self, obj: Job) -> str:
        return f"{obj.crash_attempt}/{obj.crash_limit}"

    @admin.display(description="fingerprint")
    def fingerprint_head(self, obj: Job) -> str:
        return format_html('<code title="{}">{}</code>', obj.fingerprint, obj.fingerprint[:12])


class LeaseAdmin(JobAdmin):
    """Running jobs seen through their lease: holder, fence and time left on the store clock."""

    list_display = ("job", "task_cut", "queue_cut", "holder", "fence", "lease_expires_at", "expires_in")
    list_display_links = None
    list_filter = (QueueFilter, TaskFilter)
    ordering = ("lease_expires_at",)
    sortable_by = ("lease_expires_at",)
    actions = ("cancel_selected",)

    def get_queryset(self, request: HttpRequest) -> Any:
        now = clock.now()
        return super().get_queryset(request).annotate(store_now=Value(now, output_field=DateTimeField()))

    @admin.display(description="job")
    def job(self, obj: Job) -> str:
        return display.job_link(obj.id, display.short_id(obj.id))

    @admin.display(description="holder")
    def holder(self, obj: Job) -> str:
        return display.cut(obj.lease_holder, "worker")

    @admin.display(description="expires in")
    def expires_in(self, obj: Job) -> str:
        return display.relative(obj.lease_expires_at, obj.store_now, "{}", "EXPIRED {} ago")  # type: ignore[attr-defined]


admin.site.register(FailedJob, FailedJobAdmin)
admin.site.register(QuarantinedJob, QuarantinedJobAdmin)
admin.site.register(Lease, LeaseAdmin)
