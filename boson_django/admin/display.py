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
    """An error's first line: ``dotted.ExceptionClass: message``, before its traceback."""
    return text.splitlines()[0] if text else ""


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
        return when(getattr(obj, name))

    column.__name__ = name  # the column's CSS class, as the field's was
    return column


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
