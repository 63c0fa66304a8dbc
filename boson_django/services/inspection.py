"""Reads for operators and code: job state, attempt records, counts, lists, stats.

List reads never load payloads or results; results, output and progress are read only
by the explicit ``get_*`` calls.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DurationField, ExpressionWrapper, F

from boson_django import validation
from boson_django.models import Job, JobData, Run
from boson_django import database
from boson_django.services.jobrows import envelope_from_job
from boson_django.services.types import (
    AttemptRecord, Envelope, JobInfo, JobOutput, JobProgress, JobResult, RunInfo,
)
from boson_django.states import JobState

_INFO_FIELDS = (
    "id", "task", "queue", "state", "priority", "run_at", "attempt", "crash_attempt", "fence",
    "enqueued_at", "finalized_at", "lease_holder", "lease_expires_at",
)
_STATES = tuple(state.value for state in JobState)
_RUN_FIELDS = (
    "id", "job_id", "task", "queue", "attempt", "fence", "worker_id", "started_at",
    "finished_at", "outcome", "error", "recorded",
)


def job_state(job_id: str, *, using: str | None = None) -> tuple[Envelope, str] | None:
    job = Job.objects.using(database.alias(using)).filter(id=job_id).first()
    return None if job is None else (envelope_from_job(job), job.state)


def errors(job_id: str, *, using: str | None = None) -> list[AttemptRecord]:
    """The job's attempt records (:class:`AttemptRecord`: one per closed, recorded run --
    failures, and successes that logged), oldest first; [] for an unknown job. The name is
    the public API's; it returns every recorded attempt, not only the failed ones. Reads
    only: locks nothing."""
    runs = (
        Run.objects.using(database.alias(using))
        .filter(job_id=job_id, recorded=True, finished_at__isnull=False)
        .order_by("finished_at", "id")
    )
    return [
        AttemptRecord(r.attempt, r.fence, r.outcome, r.error, list(r.logs or []), r.finished_at, r.worker_id)  # type: ignore[arg-type]
        for r in runs
    ]


def counts(queue: str | None = None, *, using: str | None = None) -> dict[str, int]:
    """Jobs per state (every state present, zero included)."""
    qs = Job.objects.using(database.alias(using))
    if queue is not None:
        qs = qs.filter(queue=validation.name(queue, "queue"))
    found = dict(qs.order_by().values_list("state").annotate(n=_count()).values_list("state", "n"))
    return {state.value: found.get(state.value, 0) for state in JobState}


def _count() -> Any:
    return Count("id")


def list_jobs(
    state: str | None = None, queue: str | None = None, task: str | None = None,
    offset: int = 0, limit: int = 100, *, using: str | None = None,
) -> list[JobInfo]:
    """Priority then age within a queue; never loads payloads or results. A state that
    is none of the states is refused (a typo would list nothing, silently)."""
    qs = Job.objects.using(database.alias(using))
    if state is not None:
        qs = qs.filter(state=validation.one_of(getattr(state, "value", state), _STATES, "state"))
    for field, value in (("queue", queue), ("task", task)):
        if value is not None:
            qs = qs.filter(**{field: validation.name(value, field)})
    start, end = _page(offset, limit)
    rows = qs.order_by("queue", "-priority", "run_at", "id").values(*_INFO_FIELDS)[start:end]
    return [JobInfo(**row) for row in rows]


def list_runs(
    job_id: str | None = None, offset: int = 0, limit: int = 100, *, using: str | None = None
) -> list[RunInfo]:
    """Runs newest first (optionally of one job)."""
    qs = Run.objects.using(database.alias(using))
    if job_id is not None:
        qs = qs.filter(job_id=job_id)
    start, end = _page(offset, limit)
    rows = qs.order_by("-started_at", "-id").values(*_RUN_FIELDS)[start:end]
    return [RunInfo(**row) for row in rows]


def _page(offset: Any, limit: Any) -> tuple[int, int]:
    start = validation.whole(offset, "offset")
    return start, start + validation.whole(limit, "limit")


def count_runs_since(at: datetime, *, using: str | None = None) -> int:
    """Runs started at or after ``at`` (store time)."""
    return Run.objects.using(database.alias(using)).filter(started_at__gte=validation.aware(at, "at")).count()


def all_enqueued(*, using: str | None = None) -> list[Envelope]:
    """Every job the store holds, id-ordered (deleted jobs are gone)."""
    return [envelope_from_job(job) for job in Job.objects.using(database.alias(using)).order_by("id").iterator()]


def task_run_stats(task: str, *, since: datetime | None = None, using: str | None = None) -> dict[str, Any]:
    """Finished runs of ``task`` (those started at or after ``since``, store time, when
    given): counts per outcome and run-time percentiles in ms (nearest rank). Only runs a
    worker made count: the records of events that ran no handler (a cancel of a waiting
    job, a retry, a release, a quarantine at enqueue) have no worker and no run time.

    Counted and ranked by the database, one row read per percentile: a task's runs can
    number millions, and loading each to sort them here cost memory in proportion."""
    runs = Run.objects.using(database.alias(using)).filter(task=validation.name(task, "task"), finished_at__isnull=False).exclude(worker_id="").order_by()
    if since is not None:
        runs = runs.filter(started_at__gte=validation.aware(since, "since"))
    by_outcome = dict(runs.values_list("outcome").annotate(n=_count()))
    total = sum(by_outcome.values())
    ranked = (runs.annotate(took=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()))
              .order_by("took").values_list("took", flat=True))
    return {
        "task": task,
        "runs": total,
        "outcomes": by_outcome,
        "p50_ms": _nearest_rank_ms(ranked, total, 0.50),
        "p95_ms": _nearest_rank_ms(ranked, total, 0.95),
    }


def _nearest_rank_ms(ranked: Any, total: int, q: float) -> float | None:
    """The run time at rank ``q`` of ``total`` (None for no runs, or for runs evicted
    between the count and this read)."""
    if not total:
        return None
    index = min(total - 1, max(0, round(q * (total - 1))))
    took = list(ranked[index : index + 1])
    return took[0] / timedelta(milliseconds=1) if took else None  # exact: 572 us is 0.572, not 0.5720000000000001


def _data(job_id: str, kind: str, using: str | None) -> JobData | None:
    return JobData.objects.using(database.alias(using)).filter(job_id=job_id, kind=kind).first()


def get_output(job_id: str, *, using: str | None = None) -> JobOutput | None:
    row = _data(job_id, JobData.Kind.OUTPUT, using)
    return None if row is None else JobOutput(row.job_id, row.attempt, row.fence, row.at, row.data)


def get_progress(job_id: str, *, using: str | None = None) -> JobProgress | None:
    row = _data(job_id, JobData.Kind.PROGRESS, using)
    if row is None:
        return None
    data = row.data or {}
    return JobProgress(row.job_id, row.attempt, row.fence, row.at, data.get("current", 0), data.get("total"), data.get("message", ""))


def get_result(job_id: str, *, using: str | None = None) -> JobResult | None:
    row = _data(job_id, JobData.Kind.RESULT, using)
    return None if row is None else JobResult(row.job_id, row.attempt, row.fence, row.at, row.data)
