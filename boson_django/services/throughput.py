"""Throughput counters: every finished attempt, counted at ack in the ack's transaction.

Rows of ``boson_throughput_minute`` (minute, queue, outcome, wait bucket, shard), one
upsert per ack transaction however many acks it holds (:class:`Tally`). Counting at ack,
not from runs, means a job deleted at ack (retention 0) still counts, and the dashboard
reads at most a day of small rows instead of scanning runs.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from boson_django import policies
from boson_django import database
from boson_django.states import Outcome

SHARDS = 8
KEEP = timedelta(days=2)

def label(outcome: Outcome, spent: int, max_attempts: int) -> str | None:
    """What a finished attempt counts as; ``None`` for acks that finish no attempt."""
    if outcome is Outcome.SUCCESS:
        return "completed"
    if outcome is Outcome.RETRY:
        return "failed" if policies.gives_up(spent, max_attempts) else "retried"
    if outcome in (Outcome.UNDECODABLE, Outcome.DISCARD):
        return "failed"
    if outcome is Outcome.SKIP:
        return "skipped"
    return None


def wait_ms(admitted: datetime, due: datetime) -> float:
    """Milliseconds from due to admitted, from whole microseconds (float seconds would put
    a wait of exactly 1023 ms at 1022.9999999999999)."""
    return (admitted - due) / timedelta(milliseconds=1)


def wait_bucket(wait_ms: float) -> int:
    """``floor(log2(wait_ms + 1))``, exactly (no rounding of a float log2 at the edges):
    bucket b holds waits in [2**b - 1, 2**(b+1) - 1) ms. The batched ack computes the same
    in SQL (:mod:`boson_django.services.ack_pg`)."""
    return math.frexp(max(wait_ms, 0.0) + 1.0)[1] - 1


class Tally:
    """A transaction's finished attempts, counted in memory and written by one upsert at
    its end (:meth:`write`): keys in sorted order under one shard, so two transactions
    counting the same keys lock them in the same order. One upsert per ack, each with its
    own shard, let two flushes of retries lock the same rows in opposite orders and
    deadlock (seen in PostgreSQL's log under concurrent flushes; tests/concurrency)."""

    def __init__(self) -> None:
        self.keys: Counter[tuple[str, str, int]] = Counter()

    def finish(self, job: Any, outcome: Outcome, spent: int, now: datetime) -> None:
        """Count this ack's finished attempt, if it finishes one (call before the
        transition rewrites ``run_at``)."""
        kind = label(outcome, spent, job.max_attempts)
        if kind is not None:
            self.add(job.queue, kind, job.attempted_at, job.run_at, now)

    def add(self, queue: str, kind: str, attempted_at: datetime | None, run_at: datetime | None, now: datetime) -> None:
        waited = wait_ms(attempted_at or now, run_at) if run_at else 0.0
        self.keys[(queue, kind, wait_bucket(waited))] += 1

    def write(self, now: datetime, using: str) -> None:
        """One upsert for everything counted; the tally is empty afterwards."""
        if not self.keys:
            return
        connection = database.conn(using)
        minute = database.dt_param(connection, now.replace(second=0, microsecond=0))
        shard = random.randrange(SHARDS)
        params: list[Any] = []
        for (queue, kind, bucket), n in sorted(self.keys.items()):
            params += [minute, queue, kind, bucket, shard, n]
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO boson_throughput_minute (minute, queue, outcome, wait_bucket, shard, count) "
                f"VALUES {', '.join(['(%s, %s, %s, %s, %s, %s)'] * len(self.keys))} "
                "ON CONFLICT (minute, queue, outcome, wait_bucket, shard) "
                "DO UPDATE SET count = boson_throughput_minute.count + excluded.count",
                params,
            )
        self.keys.clear()


@database.store_transaction
def prune_throughput(before: datetime | None = None, *, using: str | None = None) -> int:
    """Delete counter rows older than ``before`` (default: two days before store time)."""
    from boson_django import clock
    from boson_django.models import ThroughputMinute

    if before is None:
        before = clock.now(using) - KEEP
    deleted, _ = ThroughputMinute.objects.using(using).filter(minute__lt=before).delete()
    return deleted
