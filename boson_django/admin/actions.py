"""Operator actions: each hands the jobs the transition table allows to one many-id
service and reports what happened.

A tally reads the jobs' states once, skips the ones the transition table refuses, calls
the service for the rest (it works through them a chunk per transaction) and reports
each job's fate: "12 retried, 3 skipped: not failed or cancelled, 1 skipped: a live
job holds its unique key, 1 raced". A release counts the quarantined copies freed with the
jobs selected. Nothing here writes a state field itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin import helpers
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet, Value
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.dateparse import parse_datetime

from boson_django import clock, services
from boson_django.admin import audit
from boson_django.admin.paginator import capped_count, count_label
from boson_django.errors import ControlInterrupted
from boson_django.models import Job, Run
from boson_django.states import Event, allows, from_states

#: The most jobs one submission of a bulk action touches; the rest wait for the next one.
BULK_LIMIT = 10_000


def finalized_by(at: datetime) -> Q:
    """Jobs that reached their final state by ``at``: ``finalized_at`` is stamped when a
    job fails or is cancelled, and cleared when it is retried."""
    return Q(finalized_at__lte=at)


def untouched_since(at: datetime) -> Q:
    """Jobs enqueued by ``at`` and with no attempt record opened or closed after it. No job
    column says when a live or quarantined state was reached, but every transition into
    one writes a record (a retry, a release, a claim, an ack, a lease reclaimed), save the
    promotion of a due job, which keeps it live."""
    later = Run.objects.filter(job_id=OuterRef("pk")).filter(Q(started_at__gt=at) | Q(finished_at__gt=at))
    return Q(enqueued_at__lte=at) & ~Exists(later)


@dataclass(frozen=True)
class Op:
    """One operator transition: the many-id service to call and how to report it."""

    event: Event
    service: Callable[[list[str]], services.Controlled]
    done: str  # "retried"
    refused: str  # "not failed or cancelled"
    settled_by: Callable[[datetime], Q]  # the jobs whose current state was reached by a time
    logged: str  # each changed job's entry in the admin history
    per: str = ""  # the rows selected, when not jobs ("fingerprint"): one job went through per row


RETRY = Op(Event.RETRY, services.retry_jobs, "retried", "not failed or cancelled", finalized_by, "Retried")
CANCEL = Op(Event.CANCEL, services.cancel_jobs, "cancelled", "already finished or quarantined", untouched_since, "Cancelled")
RELEASE = Op(Event.RELEASE_QUARANTINE, services.release_jobs, "released", "not quarantined", untouched_since,
             "Released from quarantine, with the copies quarantined under its fingerprint")


@dataclass
class ActionResult:
    op: Op
    done: int = 0
    copies: int = 0  # released with the selected jobs: quarantined under the same fingerprint
    skipped: int = 0
    skipped_capped: bool = False  # more were skipped than counted (an "all matching" run)
    key_held: int = 0  # retry refused: a newer live job holds the unique key
    raced: int = 0
    changed: int = 0  # left alone: their state changed after the page was shown
    gone: int = 0  # selected, but no longer in the list they were selected from
    left: int = 0  # beyond BULK_LIMIT, untouched
    not_reached: int = 0  # after a database error stopped the run
    error: str = ""
    ids: list[str] = field(default_factory=list)  # the jobs changed, of those asked for

    def count(self, result: services.Controlled) -> None:
        self.ids += result.done
        self.done += len(result.done)
        self.copies += result.also
        self.key_held += len(result.key_held)
        self.raced += len(result.refused) + len(result.unknown)

    def message(self) -> str:
        """One part per kind of fate, in this order, each only when some job had it."""
        parts = [
            (self.skipped, f"{count_label(self.skipped, self.skipped_capped)} skipped: {self.op.refused}"),
            (self.key_held, f"{self.key_held:,} skipped: a live job holds its unique key"),
            (self.raced, f"{self.raced:,} raced (changed or deleted meanwhile)"),
            (self.changed, f"{self.changed:,} left alone: changed after the page was shown"),
            (self.gone, f"{self.gone:,} no longer in this list"),
            (self.not_reached, f"then a database error stopped it ({self.error}): {self.not_reached:,} not reached, run it again"),
            (self.left, f"stopped at {BULK_LIMIT:,}: run it again for the rest"),
        ]
        return ", ".join([self._done(), *(text for count, text in parts if count)])

    def _done(self) -> str:
        if self.op.per:
            jobs = self.done + self.copies
            return (f"{self.done:,} {self.op.per}{'' if self.done == 1 else 's'} {self.op.done} "
                    f"({jobs:,} job{'' if jobs == 1 else 's'})")
        if not self.copies:
            return f"{self.done:,} {self.op.done}"
        copies = "quarantined copy" if self.copies == 1 else "quarantined copies"
        return f"{self.done + self.copies:,} {self.op.done} ({self.done:,} selected, {self.copies:,} {copies})"

    def level(self) -> int:
        if self.not_reached:
            return messages.ERROR
        return messages.SUCCESS if self.done and not (self.raced or self.key_held or self.changed or self.gone) else messages.WARNING


def apply(op: Op, rows: Iterable[tuple[str, str]]) -> ActionResult:
    """Call ``op`` on the (id, state) rows the transition table allows, all at once. A
    database error partway is reported with what the chunks before it did."""
    tally = ActionResult(op)
    allowed = []
    for job_id, state in rows:
        if allows(state, op.event):
            allowed.append(job_id)
        else:
            tally.skipped += 1
    if allowed:
        try:
            tally.count(op.service(allowed))
        except ControlInterrupted as exc:
            tally.count(exc.result)  # type: ignore[arg-type]
            tally.not_reached, tally.error = len(exc.not_reached), str(exc.__cause__)
    return tally


def report(modeladmin: Any, request: HttpRequest, tally: ActionResult) -> None:
    """Tell the operator, and write each changed job's entry in the admin history."""
    audit.record(request, Job, tally.ids, tally.op.logged)
    modeladmin.message_user(request, tally.message(), tally.level())


def store_now_iso() -> str:
    return clock.now().isoformat()


class SnapshotActionForm(helpers.ActionForm):
    """Django's action form plus the store time the page was shown at.

    A bulk action touches only jobs whose current state was reached by then (see
    :class:`Op`), so submitting the page twice cannot act again on a job that an
    earlier submission changed and that has come back to the same state since.
    """

    snapshot = forms.CharField(label="", required=False, widget=forms.HiddenInput, initial=store_now_iso)


def snapshot_of(request: HttpRequest) -> datetime | None:
    """The posted snapshot time, or None when it is absent, naive or no valid datetime
    (``parse_datetime`` raises for a well-formed impossible date: a server error)."""
    raw = request.POST.get("snapshot") or ""
    try:
        parsed = parse_datetime(raw.replace(" ", "+")) if raw else None
    except ValueError:
        return None
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def run_job_action(modeladmin: Any, request: HttpRequest, queryset: QuerySet, op: Op, verb: str) -> Any:
    """The body of every job action: explicit selection at once, "all matching" after a
    confirm; either leaves alone the jobs that changed after the page's snapshot time."""
    snapshot = snapshot_of(request)
    across = request.POST.get("select_across") == "1"
    if across:
        if snapshot is None:
            modeladmin.message_user(request, "The page's snapshot time is missing or unreadable; reload and try again.", messages.ERROR)
            return None
        queryset = queryset.filter(enqueued_at__lte=snapshot)
        if request.POST.get("boson_confirm") != "yes":
            return confirm_page(modeladmin, request, queryset, verb, snapshot)
    states = [state.value for state in from_states(op.event)]
    # Only jobs the action can move count towards the limit: a run capped by jobs it
    # skips would stop at the same skipped jobs every time it is submitted again.
    rows = list(_with_settled(queryset.filter(state__in=states), op, snapshot)
                .order_by("id").values_list("id", "state", "settled")[: BULK_LIMIT + 1])
    skipped = capped_count(queryset.exclude(state__in=states), BULK_LIMIT)  # counted before any moves
    gone = 0 if across else len(set(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))) - queryset.count()
    current = [(job_id, state) for job_id, state, settled in rows[:BULK_LIMIT] if settled]
    tally = apply(op, current)
    tally.changed = min(len(rows), BULK_LIMIT) - len(current)
    tally.skipped, tally.skipped_capped = skipped
    tally.gone, tally.left = gone, max(0, len(rows) - BULK_LIMIT)
    report(modeladmin, request, tally)
    return None


def _with_settled(queryset: QuerySet, op: Op, snapshot: datetime | None) -> QuerySet:
    """Each job annotated with whether its state was reached by the snapshot (every job
    is, when the request carries none: a per-job button, a script)."""
    if snapshot is None:
        return queryset.annotate(settled=Value(True, output_field=BooleanField()))
    return queryset.annotate(settled=ExpressionWrapper(op.settled_by(snapshot), output_field=BooleanField()))


def confirm_page(modeladmin: Any, request: HttpRequest, queryset: QuerySet, verb: str, snapshot: datetime) -> TemplateResponse:
    n, capped = capped_count(queryset, BULK_LIMIT)
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"{verb.capitalize()} {count_label(n, capped)} {opts.verbose_name_plural}?",
        "opts": opts,
        "verb": verb,
        "count": count_label(n, capped),
        "capped": capped,
        "bulk_limit_label": f"{BULK_LIMIT:,}",
        "snapshot": snapshot,
        "action": request.POST.get("action", ""),
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "snapshot_value": request.POST.get("snapshot", ""),
        "query_string": request.GET.urlencode(),
    }
    return TemplateResponse(request, "admin/boson_django/confirm_bulk.html", context)
