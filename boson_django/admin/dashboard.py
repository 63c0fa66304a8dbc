"""The dashboard: one admin page with the whole store at a glance.

Registered as the changelist of the ``Dashboard`` proxy model, so it sits in the admin's
sidebar of the default ``admin.site`` with no custom AdminSite.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse

from boson_django import clock
from boson_django.admin import charts, display, stats
from boson_django.admin.base import ReadOnlyAdmin, own_transactions
from boson_django.admin.paginator import CAP, capped_count, count_label
from boson_django.models import Bucket, Dashboard, Duty, Job, QuarantinedFingerprint, Queue, Run

COLOURS = {"completed": "#3b9a5b", "retried": "#c58b00", "failed": "#d0443e", "p50": "#2f7ebc", "p95": "#b8336a"}


class DashboardAdmin(ReadOnlyAdmin):
    view_as = "job"

    @own_transactions
    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> TemplateResponse:
        """The panels this user may open the pages of (:func:`panels`); the others are
        neither shown nor read."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        now = clock.now()
        can = panels(self.admin_site, request)
        context = {
            **self.admin_site.each_context(request),
            "title": "Boson dashboard",
            "subtitle": None,
            "opts": self.opts,
            "store_now": now,
            "cap_label": f"{CAP:,}",
            "can": can,
            **matrix_context(now),
            **(charts_context(now) if can["runs"] else {}),
            **leases_context(now),
            "fingerprints": count_label(*capped_count(QuarantinedFingerprint.objects.all())) if can["fingerprints"] else None,
            "duties": [{"duty": d, "expires": display.relative(d.expires_at, now, "in {}", "free (expired {} ago)")}
                       for d in stats.duties()] if can["duties"] else [],
            "buckets": stats.buckets(now) if can["buckets"] else [],
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/boson_django/dashboard.html", context)


#: Dashboard panels beyond the jobs' (which ``view_job`` opens, as it opens the page),
#: and the model whose view permission shows each.
PANELS = {"runs": Run, "queues": Queue, "duties": Duty, "buckets": Bucket, "fingerprints": QuarantinedFingerprint}


def panels(site: admin.AdminSite, request: HttpRequest) -> dict[str, bool]:
    """Which :data:`PANELS` this user may see: those whose model's admin page the user may
    view (the throughput charts and counts are the runs'; a queue's name links to its
    page). A model the project unregistered from the admin shows no panel."""
    def may_view(model: Any) -> bool:
        try:
            return bool(site.get_model_admin(model).has_view_permission(request))
        except admin.sites.NotRegistered:
            return False

    return {name: may_view(model) for name, model in PANELS.items()}


def leases_context(now: datetime) -> dict[str, Any]:
    """The leases about to expire, the first ``stats.MAX_ROWS`` listed and counted as
    "20+" when there are more."""
    found = stats.leases_near_expiry(now)
    listed = found[: stats.MAX_ROWS]
    return {
        "leases": [{**row, "expires": display.relative(row["lease_expires_at"], now, "in {}", "EXPIRED {} ago"),
                    "expired": row["lease_expires_at"] <= now} for row in listed],
        "leases_label": count_label(len(listed), len(found) > len(listed)),
    }


def matrix_context(now: datetime) -> dict[str, Any]:
    queues = stats.queues_with_oldest()
    counts = stats.capped_matrix([q.name for q in queues])
    more_queues = len(queues) >= stats.MAX_QUEUES  # the rows are the first queues by name
    totals = _store_totals() if more_queues else _listed_totals(queues, counts)
    labels = {s: count_label(*totals[s]) for s in stats.STATES}
    return {
        "states": stats.STATES,
        "rows": [_queue_row(q, counts, now) for q in queues],
        "state_totals": [{"state": s, "label": labels[s], "url": display.changelist_url("job", state=s)} for s in stats.STATES],
        "more_queues": more_queues,
        "running": labels["running"],
        "quarantined": labels["quarantined"],
    }


def _queue_row(q: Any, counts: dict[tuple[str, str], int], now: datetime) -> dict[str, Any]:
    cells = [{"state": state, "label": count_label(min(n, CAP), n > CAP), "n": n,
              "url": display.changelist_url("job", queue=q.name, state=state)}
             for state, n in ((state, counts.get((q.name, state), 0)) for state in stats.STATES)]
    oldest = None
    if q.oldest_id:
        oldest = {"id": q.oldest_id, "waiting": display.duration(now - q.oldest_run_at) if q.oldest_run_at <= now else "0s"}
    return {"queue": q, "cells": cells, "oldest": oldest}


def _listed_totals(queues: list[Any], counts: dict[tuple[str, str], int]) -> dict[str, tuple[int, bool]]:
    """Per state, the sum over the listed queues (each capped) and whether any was capped."""
    return {state: (sum(min(counts.get((q.name, state), 0), CAP) for q in queues),
                    any(counts.get((q.name, state), 0) > CAP for q in queues)) for state in stats.STATES}


def _store_totals() -> dict[str, tuple[int, bool]]:
    """Per state, every queue's jobs: the listed queues are only the first ones by name."""
    return {state: capped_count(Job.objects.filter(state=state)) for state in stats.STATES}


def charts_context(now: datetime) -> dict[str, Any]:
    minute = now.replace(second=0, microsecond=0)
    hour_start = minute - timedelta(minutes=59)
    day_span = timedelta(minutes=15)
    day_start = minute.replace(minute=minute.minute - minute.minute % 15) - day_span * 95
    rows = stats.minute_counts(day_start, now)
    hour = stats.Binned(hour_start, timedelta(minutes=1), 60).add(rows)
    day = stats.Binned(day_start, day_span, 96).add(rows)
    return {
        "hour_totals": hour.totals(),
        "day_totals": day.totals(),
        "charts": [
            _throughput(hour, "Throughput, last hour (per minute)", "%H:%M", 10),
            _throughput(day, "Throughput, last day (per 15 minutes)", "%H:%M", 16),
            _latency(hour, "Wait before start, last hour (per minute)", "%H:%M", 10),
            _latency(day, "Wait before start, last day (per 15 minutes)", "%H:%M", 16),
        ],
    }


def _throughput(binned: stats.Binned, title: str, fmt: str, every: int) -> charts.Chart:
    series = [charts.Series(o, COLOURS[o], [float(v) for v in binned.counts[o]]) for o in ("completed", "retried", "failed")]
    return charts.line_chart(title, "jobs", series, binned.start, binned.span, binned.bins, every, fmt)


def _latency(binned: stats.Binned, title: str, fmt: str, every: int) -> charts.Chart:
    series = [charts.Series(f"p{int(q * 100)}", COLOURS[f"p{int(q * 100)}"], binned.percentile(q)) for q in (0.5, 0.95)]
    return charts.line_chart(title, "ms", series, binned.start, binned.span, binned.bins, every, fmt, y_fmt=_ms)


def _ms(value: float) -> str:
    return display.duration(timedelta(milliseconds=value)) if value else "0"


admin.site.register(Dashboard, DashboardAdmin)
