"""Runs: every attempt of every job, read-only, newest first."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Case, CharField, OuterRef, Subquery, When
from django.db.models.functions import Substr
from django.utils.html import format_html

from boson_django.admin import display, search
from boson_django.admin.base import ReadOnlyAdmin
from boson_django.admin.filters import OutcomeFilter, QueueFilter
from boson_django.admin.jobs import ERROR_HEAD, SearchedChangeList
from boson_django.models import Job, Run


class RunAdmin(display.TaskQueueColumns, ReadOnlyAdmin):
    #: Fits 1280 px beside the admin's sidebars: a run opens from its start time (its id
    #: and queue are on its page; the queue is a filter too).
    list_display = ("started_at", "job_cut", "task_cut", "worker_cut", "duration", "outcome_badge", "error_head_display")
    list_display_links = ("started_at",)
    list_filter = (OutcomeFilter, QueueFilter, "recorded")
    #: A task's page links to its runs of the last 24 hours (``boson_run_task_started``).
    linked_lookups = ("task", "started_at__gte")
    search_fields = ("task", "queue", "job__id")  # matched by get_search_results
    search_help_text = ("Task (part of its name), queue, or the start of the job's id; worker: the open runs "
                        "of a worker's jobs. Narrow a word with task:, queue:, id: or worker:.")
    ordering = ("-id",)
    sortable_by = ("id",)
    show_facets = admin.ShowFacets.NEVER
    readonly_fields = ("job_link", "started", "finished", "error_pre", "logs_pre")
    fields = ("job_link", "task", "queue", "attempt", "fence", "worker_id", "started", "finished", "outcome", "recorded", "error_pre", "logs_pre")

    def get_changelist(self, request, **kwargs):  # type: ignore[no-untyped-def]
        return SearchedChangeList

    def get_search_results(self, request, queryset, search_term):  # type: ignore[no-untyped-def]
        """The runs every word of ``search_term`` matches (:mod:`boson_django.admin.search`)."""
        if not search_term.strip():
            return queryset, False
        found, whole = search.narrowed(queryset, search.run_fields(queryset.db).terms(search_term))
        setattr(request, search.WHOLE, whole)
        return found, False

    def get_queryset(self, request):  # type: ignore[no-untyped-def]
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("_changelist"):
            qs = qs.defer("error", "logs").annotate(error_head=Substr("error", 1, ERROR_HEAD), **_retry_context())
        return qs

    @admin.display(description="job")
    def job_cut(self, obj: Run) -> str:
        return display.job_link(obj.job_id, display.short_id(obj.job_id))

    @admin.display(description="worker")
    def worker_cut(self, obj: Run) -> str:
        return display.cut(obj.worker_id, "worker")

    @admin.display(description="outcome")
    def outcome_badge(self, obj: Run) -> str:
        """The attempt's number and what ended it, in colour: ``success`` green. (The
        list showed the run's ``recorded`` flag as Django's boolean icon, which drew
        every success without log lines -- not an attempt record -- as a red cross; the
        flag stays a filter and is on the run's page.)"""
        if obj.finished_at is None:
            label = "running"
        else:
            label = display.outcome_label(obj.outcome, getattr(obj, "next_outcome", None), getattr(obj, "job_state", None))
        return format_html("#{} {}", obj.attempt, display.outcome_badge(label))

    @admin.display(description="took")
    def duration(self, obj: Run) -> str:
        return "—" if obj.finished_at is None else display.duration(obj.finished_at - obj.started_at)

    @admin.display(description="error")
    def error_head_display(self, obj: Run) -> str:
        return display.cut(display.first_line(getattr(obj, "error_head", None)), "error")

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


def _retry_context() -> dict[str, Case]:
    """For a ``retry`` run only (the others need neither; a ``CASE`` reads no more): the
    outcome of its job's next run, found by the ``(job, fence)`` index, and its job's
    state -- what :func:`display.outcome_label` needs to tell the attempt that failed
    the job from the ones it retried after."""
    later = (Run.objects.filter(job_id=OuterRef("job_id"), fence__gte=OuterRef("fence"), id__gt=OuterRef("id"))
             .order_by("fence", "id").values("outcome")[:1])
    state = Job.objects.filter(id=OuterRef("job_id")).values("state")[:1]
    return {name: Case(When(outcome="retry", then=Subquery(query)), default=None, output_field=CharField())
            for name, query in (("next_outcome", later), ("job_state", state))}


admin.site.register(Run, RunAdmin)
