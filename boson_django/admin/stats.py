"""The dashboard's numbers: each a bounded query, none an unbounded count over the jobs."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    DateTimeField, DurationField, ExpressionWrapper, F, IntegerField, OuterRef, Subquery, Sum, Value,
)

from boson_django.admin.paginator import CAP
from boson_django.models import Bucket, Duty, Job, Queue, ThroughputMinute
from boson_django.policies import BucketState
from boson_django import database
from boson_django.states import JobState

STATES = [s.value for s in JobState]
MAX_QUEUES = 50
MAX_ROWS = 20
OUTCOMES = ("completed", "retried", "failed", "skipped")


def queues_with_oldest() -> list[Queue]:
    """Queues (first ``MAX_QUEUES`` by name) with their oldest available job: one query."""
    oldest = Job.objects.filter(queue=OuterRef("name"), state=JobState.AVAILABLE.value).order_by("run_at", "id")
    return list(
        Queue.objects.order_by("name").annotate(
            oldest_id=Subquery(oldest.values("id")[:1]), oldest_run_at=Subquery(oldest.values("run_at")[:1])
        )[:MAX_QUEUES]
    )


def capped_matrix(queues: list[str]) -> dict[tuple[str, str], int]:
    """Jobs per (queue, state), each cell counting at most ``CAP + 1`` index entries: one query."""
    if not queues:
        return {}
    part = "SELECT %s, %s, (SELECT COUNT(*) FROM (SELECT 1 FROM boson_job WHERE queue = %s AND state = %s LIMIT %s) t)"
    sql, params = [], []
    for queue in queues:
        for state in STATES:
            sql.append(part)
            params += [queue, state, queue, state, CAP + 1]
    with database.conn(None).cursor() as cursor:
        cursor.execute(" UNION ALL ".join(sql), params)
        return {(q, s): int(n) for q, s, n in cursor.fetchall()}


def leases_near_expiry(now: datetime) -> list[dict[str, Any]]:
    """Running jobs with less than a third of their own lease left (expired ones first):
    the first ``MAX_ROWS``, and one more when there are more.

    A holder renews every third of its shortest lease, so a healthy short lease (a task's
    ``lease_ms`` of 3 s) always has less than a third of the default one left: each job
    is measured against its own ``lease_ms``, as three times its time left."""
    left = ExpressionWrapper((F("lease_expires_at") - Value(now, DateTimeField())) * 3, DurationField())
    lease_ms = ExpressionWrapper(F("lease_ms"), IntegerField())  # SQLite multiplies no BigIntegerField by a duration
    own = ExpressionWrapper(lease_ms * Value(timedelta(milliseconds=1)), DurationField())
    return list(
        Job.objects.filter(state=JobState.RUNNING.value)
        .alias(left=left).filter(left__lte=own)
        .order_by("lease_expires_at")
        .values("id", "task", "queue", "lease_holder", "fence", "lease_expires_at")[: MAX_ROWS + 1]
    )


def duties() -> list[Duty]:
    return list(Duty.objects.order_by("name")[:MAX_ROWS])


def buckets(now: datetime) -> list[dict[str, Any]]:
    rows = []
    for b in Bucket.objects.order_by("name")[:MAX_ROWS]:
        state = BucketState(b.limit, b.window_ms, b.burst, b.tokens, b.refilled_at)
        state.refill(now)
        rows.append({"name": b.name, "tokens": state.tokens, "capacity": b.capacity, "limit": b.limit, "window_ms": b.window_ms,
                     "fill": 100 * state.tokens / b.capacity if b.capacity else 0})
    return rows


def minute_counts(since: datetime, now: datetime) -> list[tuple[datetime, str, int, int]]:
    """(minute, outcome, wait bucket, count) since ``since``: one grouped read of the counters."""
    rows = (
        ThroughputMinute.objects.filter(minute__gte=since, minute__lte=now)
        .values_list("minute", "outcome", "wait_bucket").annotate(n=Sum("count")).order_by()
    )
    return [(database.dt_not_null(m), o, b, n) for m, o, b, n in rows]


class Binned:
    """Counter rows folded into equal time bins: counts per outcome and a wait histogram."""

    def __init__(self, start: datetime, span: timedelta, bins: int):
        self.start, self.span, self.bins = start, span, bins
        self.counts: dict[str, list[int]] = {o: [0] * bins for o in OUTCOMES}
        self.waits: list[dict[int, int]] = [defaultdict(int) for _ in range(bins)]

    def add(self, rows: list[tuple[datetime, str, int, int]]) -> Binned:
        for minute, outcome, bucket, n in rows:
            i = int((minute - self.start) / self.span)
            if 0 <= i < self.bins and outcome in self.counts:
                self.counts[outcome][i] += n
                self.waits[i][bucket] += n
        return self

    def percentile(self, q: float) -> list[float | None]:
        return [wait_percentile(hist, q) for hist in self.waits]

    def totals(self) -> dict[str, int]:
        return {o: sum(v) for o, v in self.counts.items()}


def wait_percentile(hist: dict[int, int], q: float) -> float | None:
    """Upper bound in ms of the log2 bucket holding the q-quantile (``None`` with no data)."""
    total = sum(hist.values())
    if not total:
        return None
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= q * total:
            return float(2 ** (bucket + 1) - 1)
    return None
