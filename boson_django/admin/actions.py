"""Operator actions: each calls one service per job and reports what happened.

A tally reads the jobs' states once, skips the ones the transition table refuses, calls
the service for the rest and counts a ``False`` or a vanished job as a lost race:
"12 retried, 3 skipped: not failed or cancelled, 1 raced". Nothing here writes a state
field itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.dateparse import parse_datetime

from boson_django import clock, services
from boson_django.admin.paginator import capped_count, count_label
from boson_django.errors import UnknownJob
from boson_django.states import Event, allows

#: The most jobs one submission of a bulk action touches; the rest wait for the next one.
BULK_LIMIT = 10_000


@dataclass(frozen=True)
class Op:
    """One operator transition: the service to call and how to report it."""

    event: Event
    service: Callable[[str], bool]
    done: str  # "retried"
    refused: str  # "not failed or cancelled"


RETRY = Op(Event.RETRY, services.retry, "retried", "not failed or cancelled")
CANCEL = Op(Event.CANCEL, services.cancel, "cancelled", "already finished")
RELEASE = Op(Event.RELEASE_QUARANTINE, services.release_quarantined, "released", "not quarantined")


@dataclass
class Tally:
    op: Op
    done: int = 0
    skipped: int = 0
    raced: int = 0
    left: int = 0  # beyond BULK_LIMIT, untouched
    ids: list[str] = field(default_factory=list)

    def message(self) -> str:
        parts = [f"{self.done} {self.op.done}"]
        if self.skipped:
            parts.append(f"{self.skipped} skipped: {self.op.refused}")
        if self.raced:
            parts.append(f"{self.raced} raced (changed or deleted meanwhile)")
        if self.left:
            parts.append(f"stopped at {BULK_LIMIT:,}: run it again for the rest")
        return ", ".join(parts)

    def level(self) -> int:
        return messages.SUCCESS if self.done and not self.raced else messages.WARNING


def apply(op: Op, rows: Iterable[tuple[str, str]]) -> Tally:
    """Call ``op`` on each (id, state) row the transition table allows."""
    tally = Tally(op)
    for job_id, state in rows:
        if not allows(state, op.event):
            tally.skipped += 1
            continue
        try:
            changed = op.service(job_id)
        except UnknownJob:
            changed = False
        if changed:
            tally.done += 1
        else:
            tally.raced += 1
    return tally


def report(modeladmin: Any, request: HttpRequest, tally: Tally) -> None:
    modeladmin.message_user(request, tally.message(), tally.level())


def store_now_iso() -> str:
    return clock.now().isoformat()


class SnapshotActionForm(helpers.ActionForm):
    """Django's action form plus the store time the page was shown at.

    A bulk action over "all matching" touches only jobs enqueued by then.
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
    """The body of every job action: explicit selection at once, "all matching" after a confirm."""
    across = request.POST.get("select_across") == "1"
    if across:
        snapshot = snapshot_of(request)
        if snapshot is None:
            modeladmin.message_user(request, "The page's snapshot time is missing or unreadable; reload and try again.", messages.ERROR)
            return None
        queryset = queryset.filter(enqueued_at__lte=snapshot)
        if request.POST.get("boson_confirm") != "yes":
            return confirm_page(modeladmin, request, queryset, verb, snapshot)
    rows = list(queryset.order_by("id").values_list("id", "state")[: BULK_LIMIT + 1])
    tally = apply(op, rows[:BULK_LIMIT])
    tally.left = max(0, len(rows) - BULK_LIMIT)
    report(modeladmin, request, tally)
    return None


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
        "bulk_limit": BULK_LIMIT,
        "snapshot": snapshot,
        "action": request.POST.get("action", ""),
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "snapshot_value": request.POST.get("snapshot", ""),
        "query_string": request.GET.urlencode(),
    }
    return TemplateResponse(request, "admin/boson_django/confirm_bulk.html", context)
