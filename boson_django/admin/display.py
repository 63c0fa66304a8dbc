"""Small escaped renderers shared by the admin pages (format_html everywhere)."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from boson_django.durations import duration
from boson_django.services.jobrows import UNREADABLE, decoded

STATE_COLOURS = {
    "scheduled": "#6b7fa3", "available": "#2f7ebc", "running": "#8a5cc7", "retryable": "#c58b00",
    "completed": "#3b9a5b", "skipped": "#7d8a96", "failed": "#d0443e", "cancelled": "#9a6b4f",
    "quarantined": "#b8336a",
}


def badge(text: str, colour: str | None = None) -> str:
    colour = colour or STATE_COLOURS.get(text, "#7d8a96")
    return format_html(
        '<span class="boson-badge" style="background:{};color:#fff;border-radius:4px;padding:1px 6px;'
        'font-size:0.85em;white-space:nowrap">{}</span>',
        colour, text,
    )


def pretty_json(value: Any) -> str:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre class="boson-pre">{}</pre>', text)


def stored_json(text: str | None) -> str:
    """JSON stored as ``text``, pretty-printed; ``—`` for none. JSON nested too deep for
    Python to decode (or to print again) is shown as the text it is stored as."""
    if text is None:
        return "—"
    value = decoded(text, UNREADABLE)
    if value is not UNREADABLE:
        try:
            return pretty_json(value)
        except RecursionError:
            pass
    return format_html('<p class="boson-warn">Nested too deep to decode: the stored JSON as it is.</p>'
                       '<pre class="boson-pre">{}</pre>', text)


def pre(text: str) -> str:
    return format_html('<pre class="boson-pre">{}</pre>', text) if text else "—"


def number(value: float) -> str:
    """``3`` for 3.0 (progress is stored as a float), ``2.5`` as it is."""
    return str(int(value)) if float(value).is_integer() else str(value)


def first_line(text: str | None) -> str:
    """An error's first line: ``dotted.ExceptionClass: message``, before its traceback
    (the worker writes errors so). An error that is a bare traceback, written some
    other way, names its exception on its last line: that line."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1].strip()
    return lines[0]


def when(at: datetime | None, *, precise: bool = False) -> str:
    """A time in the active time zone (Django's ``TIME_ZONE``, or the one a middleware
    activated) and named by it -- ``2030-01-01 09:30:00 EST`` -- as Django's own fields
    and the ``date`` filter show times, so every time on a page is in one zone and says
    which. ``precise`` adds microseconds (a due time set by backoff)."""
    if at is None:
        return "—"
    local = timezone.localtime(at)
    return local.strftime(f"%Y-%m-%d %H:%M:%S{'.%f' if precise else ''} %Z")


@functools.cache
def time_column(model: type[models.Model], name: Any) -> Any:
    """A list column showing ``model``'s datetime field ``name`` through :func:`when`,
    sortable by the field; any other column as it is. Cached, so the changelist's
    ``sortable_by`` finds the very callable its ``list_display`` holds."""
    if not isinstance(name, str):
        return name
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return name
    if not isinstance(field, models.DateTimeField):
        return name

    @admin.display(description=field.verbose_name, ordering=name)
    def column(obj: Any) -> str:
        # a narrow column breaks the line after the date only, the zone kept with the time
        day, space, rest = when(getattr(obj, name)).partition(" ")
        return day + space + rest.replace(" ", "\N{NO-BREAK SPACE}")

    column.__name__ = name  # the column's CSS class, as the field's was
    return column


class TaskQueueColumns:
    """The ``task_cut`` and ``queue_cut`` list columns of an admin whose rows (jobs, runs)
    have ``task`` and ``queue``."""

    @admin.display(description="task")
    def task_cut(self, obj: Any) -> str:
        return cut(obj.task, "task")

    @admin.display(description="queue")
    def queue_cut(self, obj: Any) -> str:
        return cut(obj.queue, "queue")


def cut(text: str | None, kind: str) -> str:
    """``text`` in a list cell of the width its ``kind`` gives (``boson-cut-<kind>`` in
    the admin's style), cut short with an ellipsis there and whole in its title. A task
    is cut at its start (``…tasks.send_mail``): its end names it."""
    if not text:
        return "—"
    if kind == "task":
        return format_html('<span class="boson-cut boson-cut-task" title="{}"><bdi>{}</bdi></span>', text, text)
    return format_html('<span class="boson-cut boson-cut-{}" title="{}">{}</span>', kind, text, text)


def short_id(job_id: str) -> str:
    """A job id for a list cell: its start (what a search by id prefix takes) and its
    end (which tells jobs enqueued in the same second apart), whole in the title."""
    shown = job_id if len(job_id) <= 14 else f"{job_id[:8]}…{job_id[-4:]}"
    return format_html('<span class="boson-cut boson-cut-id" title="{}">{}</span>', job_id, shown)


OUTCOME_COLOURS = {
    "success": STATE_COLOURS["completed"], "failed": STATE_COLOURS["failed"], "discard": STATE_COLOURS["failed"],
    "undecodable": STATE_COLOURS["failed"], "retry": STATE_COLOURS["retryable"], "lease_lost": STATE_COLOURS["running"],
    "quarantined": STATE_COLOURS["quarantined"], "cancelled": STATE_COLOURS["cancelled"], "running": STATE_COLOURS["running"],
}


def outcome_label(outcome: str, next_outcome: str | None, job_state: str | None) -> str:
    """What ended a run, as an operator reads it. A run's outcome is the handler's ack,
    so the attempt that spent the last retry is stored ``retry`` like the ones before it:
    it is labelled ``failed`` when the job failed on it -- the job's latest run while the
    job is failed, or one an operator's retry (``retried``) followed."""
    if outcome == "retry" and (next_outcome == "retried" or (next_outcome is None and job_state == "failed")):
        return "failed"
    return outcome


def outcome_badge(label: str) -> str:
    """A run's outcome label (:func:`outcome_label`; ``running`` for an open run) as a badge."""
    return badge(label, OUTCOME_COLOURS.get(label, STATE_COLOURS["skipped"]))


def run_stats(stats: dict[str, Any], runs_url: str) -> str:
    """``120 finished (118 success, 2 retry); run time p50 41 ms, p95 230 ms``, linked to
    the runs; ``none finished`` when there are none."""
    if not stats["runs"]:
        return "none finished"
    outcomes = ", ".join(f"{n:,} {outcome}" for outcome, n in sorted(stats["outcomes"].items(), key=lambda kv: -kv[1]))
    took = f"run time p50 {_ms(stats['p50_ms'])}, p95 {_ms(stats['p95_ms'])}"
    return format_html('<a href="{}">{} finished</a> ({}); {}', runs_url, f"{stats['runs']:,}", outcomes, took)


def _ms(value: float | None) -> str:
    return "—" if value is None else duration(timedelta(milliseconds=value))


def relative(at: datetime | None, now: datetime, future: str = "in {}", past: str = "{} ago") -> str:
    if at is None:
        return "—"
    delta = at - now
    return (future if delta.total_seconds() >= 0 else past).format(duration(delta))


def job_link(job_id: str, text: str | None = None) -> str:
    """A link to the job's page; the id goes in the URL in the admin's quoted form, which
    the page unquotes (unquoted, ``a_5Fb`` would open the page of ``a_b``)."""
    url = reverse("admin:boson_django_job_change", args=[quote(job_id)])
    return format_html('<a href="{}">{}</a>', url, text or job_id)


def changelist_url(model: str, **params: str) -> str:
    from urllib.parse import urlencode

    url = reverse(f"admin:boson_django_{model}_changelist")
    return f"{url}?{urlencode(params)}" if params else url
