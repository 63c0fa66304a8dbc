"""The job lists and the job detail page; per-job buttons post to small admin URLs."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models.functions import Substr
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from boson_django import clock
from boson_django.admin import actions, display, search, stored, summary
from boson_django.admin.base import ReadOnlyAdmin, has_perm, own_transactions
from boson_django.admin.filters import QueueFilter, TaskFilter
from boson_django.models import Job, JobData, Run
from boson_django.states import allows

#: The columns a list loads: no payload, checkpoint, result or full error text.
LIST_FIELDS = (
    "id", "task", "queue", "state", "priority", "attempt", "max_attempts", "crash_attempt", "crash_limit", "run_at",
    "finalized_at", "fingerprint", "fence", "lease_holder", "lease_expires_at",
)
ERROR_HEAD = 120
MAX_RUNS_SHOWN = 100

OPS = {
    "retry": (actions.RETRY, "operate_job"),
    "cancel": (actions.CANCEL, "operate_job"),
    "release": (actions.RELEASE, "release_quarantine"),
}


class SearchedChangeList(ChangeList):
    """A list whose search may ask for its matches to be sorted whole (:mod:`search`)."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> Any:
        qs = super().get_queryset(request, exclude_parameters)
        return search.sorted_whole(qs) if getattr(request, search.WHOLE, False) else qs


class JobChangeList(SearchedChangeList):
    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> Any:
        qs = super().get_queryset(request, exclude_parameters)
        return qs.only(*LIST_FIELDS).annotate(error_head=Substr("last_error", 1, ERROR_HEAD))


class JobAdmin(display.TaskQueueColumns, ReadOnlyAdmin):
    view_as = "job"
    #: Fits 1280 px beside the admin's sidebars: each text cut to its width, the last
    #: error taking what is left (a job's priority and finish time are on its page).
    list_display = ("id_cut", "task_cut", "queue_cut", "state_attempts", "run_at", "error_head_display")
    list_filter = ("state", QueueFilter, TaskFilter)
    #: Shown so the admin draws its search box; :meth:`get_search_results` matches them
    #: (:mod:`boson_django.admin.search`), never Django's ``icontains`` over the table.
    search_fields = ("task", "queue", "unique_key", "id", "lease_holder")
    search_help_text = ("Task (part of its name), queue, unique key or id (its start), or the worker "
                        "holding a running job. Narrow a word with task:, queue:, key:, id: or worker:.")
    ordering = ("-id",)
    sortable_by = ("id_cut", "run_at", "finalized_at")  # finalized_at: the failed jobs' list
    show_facets = admin.ShowFacets.NEVER
    action_form = actions.SnapshotActionForm
    actions = ("retry_selected", "cancel_selected", "release_selected")
    change_form_template = "admin/boson_django/job/change_form.html"
    readonly_fields = (
        "args_json", "kwargs_json", "meta_json", "state_badge", "last_error_pre", "store_now",
        "due", "enqueued", "started", "attempted", "finalized", "expires", "lease_expires", "progress",
        "checkpoint_json",
    )
    fieldsets = (
        ("Envelope", {"fields": ("id", "task", "queue", "priority", "args_json", "kwargs_json", "meta_json",
                                 "unique_key", "fingerprint", "rate_class", "weight")}),
        ("Policy", {"fields": ("max_attempts", "retention_ms", "lease_ms", "timeout_ms", "crash_limit")}),
        ("State", {"fields": ("state_badge", "attempt", "crash_attempt", "last_error_pre")}),
        ("Store-clock timings", {"fields": ("store_now", "due", "enqueued", "started", "attempted",
                                            "finalized", "expires")}),
        ("Lease", {"fields": ("lease_holder", "fence", "lease_expires", "charged_weight")}),
        ("Progress and checkpoint", {"fields": ("progress", "checkpoint_json")}),
    )

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return JobChangeList

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        """The jobs every word of ``search_term`` matches (:mod:`boson_django.admin.search`)."""
        if not search_term.strip():
            return queryset, False
        found, whole = search.narrowed(queryset, search.job_fields(queryset.db).terms(search_term))
        setattr(request, search.WHOLE, whole)
        return found, False

    # -- list columns: each cut to its width at 1280 px, whole in its title ------------
    @admin.display(description="id", ordering="id")
    def id_cut(self, obj: Job) -> str:
        return display.short_id(obj.id)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj: Job) -> str:
        return display.badge(obj.state)

    @admin.display(description="state", ordering="state")
    def state_attempts(self, obj: Job) -> str:
        return format_html('{} <span class="boson-quiet" title="attempts">{}</span>', display.badge(obj.state),
                           self.attempts(obj))

    @admin.display(description="attempts")
    def attempts(self, obj: Job) -> str:
        return f"{obj.attempt}/{obj.max_attempts}"

    @admin.display(description="last error")
    def error_head_display(self, obj: Job) -> str:
        return display.cut(display.first_line(getattr(obj, "error_head", None)), "error")

    # -- detail fields ----------------------------------------------------------------
    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Job | None:
        """The job with its JSON columns as stored text (:mod:`boson_django.admin.stored`):
        one nested too deep to decode made the page a 500."""
        queryset = stored.job_rows(self.get_queryset(request))
        field = Job._meta.pk if from_field is None else Job._meta.get_field(from_field)
        try:
            obj = queryset.get(**{field.name: field.to_python(object_id)})  # type: ignore[union-attr]
        except (Job.DoesNotExist, ValidationError, ValueError):
            return None
        obj.store_now_value = clock.now()  # type: ignore[attr-defined]
        return obj

    @admin.display(description="args")
    def args_json(self, obj: Job) -> str:
        return display.stored_json(obj.args_text)  # type: ignore[attr-defined]

    @admin.display(description="kwargs")
    def kwargs_json(self, obj: Job) -> str:
        return display.stored_json(obj.kwargs_text)  # type: ignore[attr-defined]

    @admin.display(description="meta")
    def meta_json(self, obj: Job) -> str:
        return display.stored_json(obj.meta_text)  # type: ignore[attr-defined]

    @admin.display(description="checkpoint")
    def checkpoint_json(self, obj: Job) -> str:
        return display.stored_json(obj.checkpoint_text)  # type: ignore[attr-defined]

    @admin.display(description="last error")
    def last_error_pre(self, obj: Job) -> str:
        return display.pre(obj.last_error)

    @admin.display(description="store time now")
    def store_now(self, obj: Job) -> str:
        return display.when(obj.store_now_value)  # type: ignore[attr-defined]

    @admin.display(description="run at (due)")
    def due(self, obj: Job) -> str:
        return f"{display.when(obj.run_at, precise=True)} ({display.relative(obj.run_at, obj.store_now_value, 'due in {}', 'due {} ago')})"  # type: ignore[attr-defined]

    @admin.display(description="enqueued at")
    def enqueued(self, obj: Job) -> str:
        return display.when(obj.enqueued_at)

    @admin.display(description="started at")
    def started(self, obj: Job) -> str:
        return display.when(obj.started_at)

    @admin.display(description="attempted at")
    def attempted(self, obj: Job) -> str:
        return display.when(obj.attempted_at)

    @admin.display(description="finalized at")
    def finalized(self, obj: Job) -> str:
        return display.when(obj.finalized_at)

    @admin.display(description="expires at (retention)")
    def expires(self, obj: Job) -> str:
        if obj.expires_at is None:
            return "—"
        return f"{display.when(obj.expires_at)} ({display.relative(obj.expires_at, obj.store_now_value, 'deleted in {}', 'due for eviction {} ago')})"  # type: ignore[attr-defined]

    @admin.display(description="lease expires")
    def lease_expires(self, obj: Job) -> str:
        if obj.lease_expires_at is None:
            return "—"
        rel = display.relative(obj.lease_expires_at, obj.store_now_value, "in {}", "EXPIRED {} ago: awaiting reclaim")  # type: ignore[attr-defined]
        return f"{display.when(obj.lease_expires_at)} ({rel})"

    @admin.display(description="progress")
    def progress(self, obj: Job) -> str:
        found = stored.written(obj.id, JobData.Kind.PROGRESS)
        if found is None:
            return "—"
        if found.unreadable or not isinstance(found.data, dict):
            return display.stored_json(found.text)
        data = found.data
        total = f"/{display.number(data['total'])}" if data.get("total") is not None else ""
        return (f"{display.number(data.get('current', 0))}{total} {data.get('message', '')} "
                f"(attempt {found.attempt}, fence {found.fence}, at {display.when(found.at)})")

    # -- the detail page --------------------------------------------------------------
    def render_change_form(self, request: HttpRequest, context: dict[str, Any], add: bool = False,
                           change: bool = False, form_url: str = "", obj: Any = None) -> Any:
        """The page of a job found and this user may view (Django has checked both by
        now): only then are its runs, output and result read."""
        if obj is not None:
            context.update(self.detail_context(request, context["object_id"], obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def detail_context(self, request: HttpRequest, url_id: str, job: Job) -> dict[str, Any]:
        """Runs, loaded data, failure summary and buttons of the job whose page this is.
        ``url_id`` is the admin's URL form of its id (``a_b`` is ``a_5Fb``): looked up as
        it stands, it named another job -- the page showed that one's attempts and its
        buttons acted on it."""
        object_id = unquote(url_id)
        runs = list(Run.objects.filter(job_id=object_id).order_by("-started_at", "-id")[: MAX_RUNS_SHOWN + 1])
        for newer, run in zip([None, *runs], runs):
            label = "running" if run.finished_at is None else display.outcome_label(
                run.outcome, newer.outcome if newer is not None else None, job.state)
            run.outcome_badge = display.outcome_badge(label)  # type: ignore[attr-defined]
        load = request.GET.get("load")
        return {
            "summary": summary.summary(request, job, runs, job.store_now_value),  # type: ignore[attr-defined]
            "runs": runs[:MAX_RUNS_SHOWN],
            "runs_truncated": len(runs) > MAX_RUNS_SHOWN,
            "loaded": load if load in ("output", "result") else None,
            "output": stored.written(object_id, JobData.Kind.OUTPUT) if load == "output" else None,
            "result": stored.written(object_id, JobData.Kind.RESULT) if load == "result" else None,
            "job_buttons": self.buttons(request, object_id, url_id),
        }

    def buttons(self, request: HttpRequest, object_id: str, url_id: str) -> list[dict[str, str]]:
        """The operations this user may run and the job's current state allows."""
        state = Job.objects.filter(id=object_id).values_list("state", flat=True).first()
        return [
            {"op": name, "label": name.capitalize(), "url": reverse("admin:boson_django_job_op", args=[url_id, name])}
            for name, (op, perm) in OPS.items()
            if state is not None and allows(state, op.event) and has_perm(request, perm)
        ]

    def get_urls(self) -> list[Any]:
        if self.model is not Job:
            return super().get_urls()
        view = self.admin_site.admin_view(require_POST(self.job_op_view))
        return [path("<path:object_id>/op/<str:op>/", view, name="boson_django_job_op"), *super().get_urls()]

    @own_transactions
    def job_op_view(self, request: HttpRequest, object_id: str, op: str) -> HttpResponseRedirect:
        """``object_id`` is the URL form of the job's id, as on its page (see :meth:`detail_context`)."""
        if op not in OPS:
            raise Http404(f"no operation {op!r}")
        operation, perm = OPS[op]
        if not has_perm(request, perm):
            raise PermissionDenied
        row = Job.objects.filter(id=unquote(object_id)).values_list("id", "state").first()
        if row is None:
            raise Http404("no such job")
        actions.report(self, request, actions.apply(operation, [row]))
        return HttpResponseRedirect(reverse("admin:boson_django_job_change", args=[object_id]))

    # -- bulk actions -----------------------------------------------------------------
    def has_operate_job_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, "operate_job")

    def has_release_quarantine_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, "release_quarantine")

    @admin.action(description="Retry selected %(verbose_name_plural)s", permissions=["operate_job"])
    def retry_selected(self, request: HttpRequest, queryset: Any) -> Any:
        return actions.run_job_action(self, request, queryset, actions.RETRY, "retry")

    @admin.action(description="Cancel selected %(verbose_name_plural)s", permissions=["operate_job"])
    def cancel_selected(self, request: HttpRequest, queryset: Any) -> Any:
        return actions.run_job_action(self, request, queryset, actions.CANCEL, "cancel")

    @admin.action(description="Release selected %(verbose_name_plural)s from quarantine", permissions=["release_quarantine"])
    def release_selected(self, request: HttpRequest, queryset: Any) -> Any:
        return actions.run_job_action(self, request, queryset, actions.RELEASE, "release")


admin.site.register(Job, JobAdmin)
