"""Gauges read from the store at scrape time: the same answer from every process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

from django.db import DatabaseError, connections, transaction
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from boson_django import clock
from boson_django.metrics import REGISTRY
from boson_django import database
from boson_django.states import JobState

log = logging.getLogger("boson_django.metrics")


class StoreCollector(Collector):
    """A handful of small grouped queries per scrape; none scans finished jobs' payloads."""

    def __init__(self, using: str | None = None):
        self.using = using

    def describe(self) -> list[Any]:
        return []  # nothing is queried when the collector is registered

    def collect(self) -> Iterator[Any]:
        """Inside a transaction (``ATOMIC_REQUESTS``, a test's, a view wrapping this one in
        ``atomic``) the reads run in a savepoint and the connection is left open: closing
        it ended the caller's transaction, and a failed read aborted it (PostgreSQL)."""
        using = database.alias(self.using)
        connection = connections[using]
        nested = connection.in_atomic_block
        up = GaugeMetricFamily("boson_store_up", "1 if the last scrape could read the store.")
        try:
            with transaction.atomic(using=using) if nested else nullcontext():
                families = list(self._families(using))
        except DatabaseError:
            log.warning("boson: metrics could not read the store", exc_info=True)
            if not nested:
                connection.close()
            up.add_metric([], 0)
            yield up
            return
        finally:
            if not nested:
                connection.close_if_unusable_or_obsolete()
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self, using: str) -> Iterator[Any]:
        now = clock.now(using)
        yield from _jobs(using, now)
        yield from _buckets(using, now)
        yield from _duties(using, now)
        yield from _schedules(using)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _jobs(using: str, now: Any) -> Iterator[Any]:
    from boson_django.models import Job, Queue
    from django.db.models import Count, Min

    jobs = _gauge("boson_jobs", "Jobs in the store by queue and state.", ["queue", "state"])
    counts = {(row["queue"], row["state"]): row["n"]
              for row in Job.objects.using(using).order_by().values("queue", "state").annotate(n=Count("id"))}
    rows = dict(Queue.objects.using(using).values_list("name", "paused"))
    # A job can sit in a queue whose row was deleted as it was enqueued (delete_queue):
    # its queue is reported all the same, unpaused (it is admitted).
    queues = sorted({**dict.fromkeys((q for q, _ in counts), False), **rows}.items())
    # Every state of every queue, 0 included: a series that vanished when its last job
    # left would read as "no data" to a graph, an alert or a sum, not as none.
    for queue, _ in queues:
        for state in JobState:
            counts.setdefault((queue, state.value), 0)
    for (queue, state), n in sorted(counts.items()):
        jobs.add_metric([queue, state], n)
    oldest = _gauge("boson_queue_oldest_available_age_seconds",
                    "Age of the longest-waiting available job of each queue (0 when none waits).", ["queue"])
    waiting = dict(Job.objects.using(using).filter(state="available").order_by().values("queue")
                   .annotate(first=Min("run_at")).values_list("queue", "first"))
    paused = _gauge("boson_queue_paused", "1 if the queue is paused.", ["queue"])
    for queue, is_paused in queues:
        paused.add_metric([queue], int(is_paused))
        first = waiting.get(queue)
        oldest.add_metric([queue], max((now - first).total_seconds(), 0.0) if first else 0.0)
    yield from (jobs, oldest, paused)


def _buckets(using: str, now: Any) -> Iterator[Any]:
    from boson_django.models import Bucket
    from boson_django.policies import BucketState

    tokens = _gauge("boson_bucket_tokens", "Tokens a rate class's bucket holds now (store clock).", ["rate_class"])
    capacity = _gauge("boson_bucket_capacity", "Most tokens the bucket can hold.", ["rate_class"])
    for b in Bucket.objects.using(using):
        state = BucketState(b.limit, b.window_ms, b.burst, b.tokens, b.refilled_at)
        state.refill(now)
        tokens.add_metric([b.name], state.tokens)
        capacity.add_metric([b.name], b.capacity)
    yield from (tokens, capacity)


def _duties(using: str, now: Any) -> Iterator[Any]:
    from boson_django.models import Duty

    held = _gauge("boson_duty_held", "1 if some worker holds the duty's lease now.", ["duty"])
    holder = _gauge("boson_duty_holder_info", "The worker holding each held duty (value 1).", ["duty", "holder"])
    for d in Duty.objects.using(using):
        live = d.expires_at > now
        held.add_metric([d.name], int(live))
        if live:
            holder.add_metric([d.name, d.holder], 1)
    yield from (held, holder)


def _schedules(using: str) -> Iterator[Any]:
    from boson_django.models import StoredSchedule

    enabled = _gauge("boson_schedule_enabled", "1 if the schedule is enabled and declared.", ["schedule"])
    next_run = _gauge("boson_schedule_next_run_timestamp_seconds", "Next slot (Unix time, store clock).", ["schedule"])
    last_run = _gauge("boson_schedule_last_run_timestamp_seconds", "Last enqueue (Unix time, store clock).", ["schedule"])
    skipped = _gauge("boson_schedule_skipped_slots", "Late slots given up by the missed policy, ever.", ["schedule"])
    for s in StoredSchedule.objects.using(using):
        enabled.add_metric([s.name], int(s.enabled and s.declared))
        if s.next_run_at:
            next_run.add_metric([s.name], s.next_run_at.timestamp())
        if s.last_run_at:
            last_run.add_metric([s.name], s.last_run_at.timestamp())
        skipped.add_metric([s.name], s.skipped_slots)
    yield from (enabled, next_run, last_run, skipped)


REGISTRY.register(StoreCollector())
