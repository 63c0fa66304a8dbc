"""Schedules: enable, disable and "run now", through the scheduler's services."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db.models import DateTimeField, OuterRef, Subquery, Value
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from boson_django import clock
from boson_django.admin import audit, display
from boson_django.admin.base import ReadOnlyAdmin, has_perm, own_transactions
from boson_django.errors import InvalidEnvelope
from boson_django.models import Job, StoredSchedule
from boson_django.schedules import run_now, set_enabled, sync_schedules

OPS = ("enable", "disable", "run_now")


class StoredScheduleAdmin(ReadOnlyAdmin):
    list_display = ("name", "task", "timing", "status", "next_run", "last_run", "last_outcome", "skipped_slots", "source")
    list_filter = ("enabled", "declared", "source")
    search_fields = ("name", "task")
    actions = ("enable_selected", "disable_selected", "run_now_selected")
    fields = ("name", "task", "timing", "status", "missed", "grace_ms", "args", "kwargs", "queue", "priority",
              "next_run", "last_run", "last_outcome", "last_slot_at", "skipped_slots", "source", "synced_at")
    readonly_fields = ("timing", "status", "next_run", "last_run", "last_outcome")
    change_form_template = "admin/boson_django/storedschedule/change_form.html"

    def get_queryset(self, request: HttpRequest) -> Any:
        last_state = Job.objects.filter(id=OuterRef("last_job_id")).values("state")[:1]
        return super().get_queryset(request).annotate(
            store_now=Value(clock.now(), output_field=DateTimeField()), last_state=Subquery(last_state)
        )

    @own_transactions
    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        """Syncs the declared schedules first (to show what code and settings declare, even
        before a worker ran) -- a write when a declaration changed, so only for a user
        allowed to see the list."""
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        self._sync(request)
        return super().changelist_view(request, extra_context)

    def _sync(self, request: HttpRequest) -> None:
        """A declaration the sync refuses (the checks report it; a web server does not run
        them) shows as an error above the rows as they are, as a worker logs it."""
        try:
            sync_schedules()
        except (ImproperlyConfigured, ValueError) as exc:
            self.message_user(request, f"Schedules not synced: {exc}", messages.ERROR)

    @admin.display(description="when")
    def timing(self, obj: StoredSchedule) -> str:
        if obj.cron:
            return f"{obj.cron} ({obj.timezone})"
        return f"every {display.duration(timedelta(milliseconds=obj.every_ms or 0))}"

    @admin.display(description="status", ordering="enabled")
    def status(self, obj: StoredSchedule) -> str:
        if not obj.declared:
            return display.badge("undeclared", "#7d8a96")
        return display.badge("enabled", "#3b9a5b") if obj.enabled else display.badge("disabled", "#c58b00")

    @admin.display(description="next run", ordering="next_run_at")
    def next_run(self, obj: StoredSchedule) -> str:
        if not (obj.enabled and obj.declared) or obj.next_run_at is None:
            return "—"
        return f"{display.when(obj.next_run_at)} ({display.relative(obj.next_run_at, obj.store_now)})"  # type: ignore[attr-defined]

    @admin.display(description="last run", ordering="last_run_at")
    def last_run(self, obj: StoredSchedule) -> str:
        if obj.last_run_at is None:
            return "never"
        return display.relative(obj.last_run_at, obj.store_now)  # type: ignore[attr-defined]

    @admin.display(description="last outcome")
    def last_outcome(self, obj: StoredSchedule) -> str:
        if not obj.last_job_id:
            return "—"
        state = getattr(obj, "last_state", None)
        return display.job_link(obj.last_job_id, display.badge(state) if state else "finished (evicted)")

    def has_operate_schedule_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, "operate_schedule")

    def _each(self, request: HttpRequest, queryset: Any, op: str) -> None:
        names = list(queryset.values_list("name", flat=True))
        done = 0
        for name in names:
            try:
                result = _apply(op, name)
            except InvalidEnvelope as exc:
                self.message_user(request, f"Schedule {name}: nothing enqueued: {exc}", messages.ERROR)
                continue
            if result:
                done += 1
                audit.record(request, StoredSchedule, [name], _logged(op, result))
        verb = {"enable": "enabled", "disable": "disabled", "run_now": "enqueued"}[op]
        self.message_user(request, f"{done} {verb}" + (f", {len(names) - done} unchanged" if done < len(names) else ""),
                          messages.SUCCESS)

    @admin.action(description="Enable selected schedules", permissions=["operate_schedule"])
    def enable_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "enable")

    @admin.action(description="Disable selected schedules", permissions=["operate_schedule"])
    def disable_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "disable")

    @admin.action(description="Run selected schedules now", permissions=["operate_schedule"])
    def run_now_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, "run_now")

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        buttons = []
        if has_perm(request, "operate_schedule"):
            buttons = [{"op": op, "label": op.replace("_", " ").capitalize(),
                        "url": reverse("admin:boson_django_storedschedule_op", args=[object_id, op])} for op in OPS]
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "schedule_buttons": buttons})

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(require_POST(self.schedule_op_view))
        return [path("<path:object_id>/op/<str:op>/", view, name="boson_django_storedschedule_op"), *super().get_urls()]

    @own_transactions
    def schedule_op_view(self, request: HttpRequest, object_id: str, op: str) -> HttpResponseRedirect:
        if not has_perm(request, "operate_schedule") or op not in OPS:
            raise PermissionDenied
        name = unquote(object_id)  # the admin's URL form of the name (``_`` is ``_5F``)
        if not StoredSchedule.objects.filter(name=name).exists():
            raise Http404("no such schedule")
        try:
            result = _apply(op, name)
        except InvalidEnvelope as exc:
            self.message_user(request, f"Schedule {name}: nothing enqueued: {exc}", messages.ERROR)
            return HttpResponseRedirect(reverse("admin:boson_django_storedschedule_change", args=[object_id]))
        if result:
            audit.record(request, StoredSchedule, [name], _logged(op, result))
        text = f"Schedule {name}: " + (f"enqueued job {result}" if op == "run_now" else f"{op}d" if result else f"already {op}d")
        self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:boson_django_storedschedule_change", args=[object_id]))


def _logged(op: str, result: Any) -> str:
    """A schedule operation's entry in the admin history."""
    return f"Ran now: enqueued job {result}" if op == "run_now" else f"{op.capitalize()}d"


def _apply(op: str, name: str) -> Any:
    """Run ``op`` on the schedule. "run now" raises ``InvalidEnvelope`` when the row's job
    cannot be enqueued: a row kept after its declaration went may name a task that is no
    longer registered."""
    if op == "run_now":
        return run_now(name)
    return set_enabled(name, op == "enable")


admin.site.register(StoredSchedule, StoredScheduleAdmin)
