"""The panel a failed, retrying or quarantined job's page opens with: its state, why (the
first line of its last error; for quarantine, its crashes and fingerprint), when it runs
next, and the buttons -- above the envelope, so a failure is read without scrolling."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.admin.utils import quote
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from boson_django.admin import display
from boson_django.admin.base import has_perm
from boson_django.admin.paginator import capped_count, count_label
from boson_django.models import Job, QuarantinedFingerprint, Run
from boson_django.states import JobState

SUMMARISED = (JobState.FAILED.value, JobState.RETRYABLE.value, JobState.QUARANTINED.value)
HEADINGS = {"failed": "Failed", "retryable": "Failed, will retry", "quarantined": "Quarantined"}
#: The most of an error's first line the panel shows (the whole error is in the attempts).
WHY_CHARS = 300


def summary(request: HttpRequest, job: Job, runs: list[Run], now: datetime) -> dict[str, Any] | None:
    """The panel of ``job`` (its ``runs`` newest first), or None for a job in another state."""
    if job.state not in SUMMARISED:
        return None
    rows = [("State", _state(job, runs)), ("Why", _why(job.last_error))]
    if job.state == JobState.QUARANTINED.value:
        rows += _quarantine(request, job, runs)
    rows.append(("Runs next", _next(job, now)))
    return {"heading": HEADINGS[job.state], "state": job.state, "rows": rows}


def _state(job: Job, runs: list[Run]) -> str:
    if job.state == JobState.QUARANTINED.value:
        said = f"crashed {job.crash_attempt} time{'s' if job.crash_attempt != 1 else ''} (crash limit {job.crash_limit})"
    elif job.state == JobState.RETRYABLE.value:
        left = job.max_attempts - job.attempt
        said = f"attempt {job.attempt} of {job.max_attempts} failed; {left} left"
    else:
        said = _why_failed(job, runs)
    return format_html("{} {}", display.badge(job.state), said)


def _why_failed(job: Job, runs: list[Run]) -> str:
    last = next((run.outcome for run in runs if run.finished_at is not None and run.recorded), "")
    if last == "discard":
        return f"after attempt {job.attempt} of {job.max_attempts}: its error is one not retried (discard_on)"
    if last == "undecodable":
        return f"after attempt {job.attempt} of {job.max_attempts}: its arguments could not be decoded"
    return f"attempt {job.attempt} of {job.max_attempts} failed: no attempts left"


def _why(error: str) -> str:
    line = display.first_line(error)
    if not line:
        return "—"
    cut = line if len(line) <= WHY_CHARS else line[:WHY_CHARS] + "…"
    more = error.strip() != line.strip()
    return format_html('<code class="boson-why" title="{}">{}</code>{}', line, cut,
                       mark_safe(' <a href="#boson-attempts">full error</a>') if more else "")


def _quarantine(request: HttpRequest, job: Job, runs: list[Run]) -> list[tuple[str, str]]:
    rows = []
    crash = next((run for run in runs if run.outcome == "lease_lost"), None)
    if crash is not None:
        rows.append(("Last crash", format_html("on {} at {}", crash.worker_id or "—", display.when(crash.finished_at))))
    copies_of = Job.objects.filter(fingerprint=job.fingerprint, state=JobState.QUARANTINED.value).exclude(id=job.id)
    copies = count_label(*capped_count(copies_of))
    fingerprint = format_html('<code title="{}">{}</code>', job.fingerprint, job.fingerprint[:16])
    if has_perm(request, "view_quarantinedfingerprint") and QuarantinedFingerprint.objects.filter(pk=job.fingerprint).exists():
        url = reverse("admin:boson_django_quarantinedfingerprint_change", args=[quote(job.fingerprint)])
        fingerprint = format_html('<a href="{}">{}</a>', url, fingerprint)
    copies_text = {"0": "no other copy", "1": "1 other copy"}.get(copies, f"{copies} other copies")
    rows.append(("Fingerprint", format_html("{}; {} quarantined under it", fingerprint, copies_text)))
    return rows


def _next(job: Job, now: datetime) -> str:
    if job.state == JobState.RETRYABLE.value:
        return format_html("{} ({})", display.when(job.run_at), display.relative(job.run_at, now, "in {}", "due {} ago"))
    if job.state == JobState.QUARANTINED.value:
        return "not until released"
    return "never: a retry gives it one more attempt"
