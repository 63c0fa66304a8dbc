"""Task policy, duties and quarantined fingerprints."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import DateTimeField, Value
from django.http import HttpRequest

from boson_django import clock, services, validation
from boson_django.admin import actions, display
from boson_django.admin.base import DeletedByService, ReadOnlyAdmin, has_perm
from boson_django.models import Duty, Job, QuarantinedFingerprint, TaskConfig
from boson_django.services.config import POLICY_FIELDS, _validated, unregistered_hint
from boson_django.states import JobState


#: The window of the finished runs a task config's page sums up.
RECENT = timedelta(hours=24)


class TaskConfigForm(forms.ModelForm):
    class Meta:
        model = TaskConfig
        fields = ("task", *POLICY_FIELDS)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        try:
            _validated({k: data.get(k) for k in POLICY_FIELDS if k in data})  # the service's own checks
            if "task" in data:
                validation.name(data["task"], "task", max_len=255)
        except ValueError as exc:
            field = getattr(exc, "field", None)
            raise forms.ValidationError({field: str(exc)} if field in self.fields else str(exc)) from exc
        return data


class TaskConfigAdmin(DeletedByService):
    """Per-task policy; a saved row goes through ``services.set_task_config``, a deleted
    one through ``services.delete_task_config`` (the task takes its code defaults again)."""

    form = TaskConfigForm
    list_display = ("task", *POLICY_FIELDS)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("task", "recent_runs") if obj else ()

    @admin.display(description="runs in the last 24 hours")
    def recent_runs(self, obj: TaskConfig) -> str:
        """What the policy being edited has done lately (``services.task_run_stats``),
        linked to the runs of the same window."""
        since = clock.now() - RECENT
        return display.run_stats(services.task_run_stats(obj.task, since=since),
                                 display.changelist_url("run", task=obj.task, started_at__gte=since.isoformat()))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_perm(request, "add_taskconfig")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return has_perm(request, "change_taskconfig")

    def delete_row(self, pk: str) -> bool:
        services.delete_task_config(pk)
        return True  # already gone is deleted too

    def save_model(self, request: HttpRequest, obj: TaskConfig, form: Any, change: bool) -> None:
        """The operator is told of a name no task has here, here (not by a Python warning,
        which ``-W error`` would raise inside the change form's transaction, undoing the save)."""
        fields = {k: form.cleaned_data.get(k) for k in POLICY_FIELDS}
        services.set_task_config(obj.task, warn_unregistered=False, **fields)
        hint = unregistered_hint(obj.task)
        if hint:
            messages.warning(request, hint)


class DutyAdmin(ReadOnlyAdmin):
    list_display = ("name", "holder", "claimed_at", "expires_at", "expires_in")
    fields = ("name", "holder", "claimed", "expires", "expires_in")
    readonly_fields = ("claimed", "expires", "expires_in")

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).annotate(store_now=Value(clock.now(), output_field=DateTimeField()))

    @admin.display(description="claimed at")
    def claimed(self, obj: Duty) -> str:
        return display.when(obj.claimed_at)

    @admin.display(description="expires at")
    def expires(self, obj: Duty) -> str:
        return display.when(obj.expires_at)

    @admin.display(description="expires in")
    def expires_in(self, obj: Duty) -> str:
        return display.relative(obj.expires_at, obj.store_now, "{}", "free (expired {} ago)")  # type: ignore[attr-defined]


class QuarantinedFingerprintAdmin(ReadOnlyAdmin):
    list_display = ("fingerprint", "task", "job", "quarantined_at", "reason")
    fields = ("fingerprint", "task", "job", "quarantined", "reason")
    readonly_fields = ("job", "quarantined")
    search_fields = ("=fingerprint", "=job_id")
    actions = ("release_selected",)

    @admin.display(description="job")
    def job(self, obj: QuarantinedFingerprint) -> str:
        return display.job_link(obj.job_id)

    @admin.display(description="quarantined at")
    def quarantined(self, obj: QuarantinedFingerprint) -> str:
        return display.when(obj.quarantined_at)

    def has_release_quarantine_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, "release_quarantine")

    @admin.action(description="Release selected fingerprints (and their quarantined jobs)", permissions=["release_quarantine"])
    def release_selected(self, request: HttpRequest, queryset: Any) -> None:
        """Releases one quarantined job per fingerprint; the service frees its siblings with it."""
        quarantined = dict(queryset.values_list("fingerprint", "job_id")[: actions.BULK_LIMIT])
        held: dict[str, set[str]] = {}
        for fingerprint, job_id in Job.objects.filter(
            fingerprint__in=list(quarantined), state=JobState.QUARANTINED.value
        ).values_list("fingerprint", "id"):
            held.setdefault(fingerprint, set()).add(job_id)
        rows = [(_released_for(quarantined[f], held[f]), JobState.QUARANTINED.value) if f in held else ("", "")
                for f in quarantined]
        tally = actions.apply(actions.RELEASE, [r for r in rows if r[0]])
        tally.skipped += sum(1 for r in rows if not r[0])
        tally.op = dataclasses.replace(actions.RELEASE, refused="no quarantined job left", per="fingerprint")
        actions.report(self, request, tally)


def _released_for(quarantined_job: str, held: set[str]) -> str:
    """The job a fingerprint's release goes through (and its history entry names): the one
    that reached the crash limit, while it is still quarantined; else any quarantined copy."""
    return quarantined_job if quarantined_job in held else min(held)


admin.site.register(TaskConfig, TaskConfigAdmin)
admin.site.register(Duty, DutyAdmin)
admin.site.register(QuarantinedFingerprint, QuarantinedFingerprintAdmin)
