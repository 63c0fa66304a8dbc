"""Concurrent ack flushes: batches of acks from several workers at once neither deadlock
nor lose a count.

Each flush writes throughput counters (and may correct rate-class buckets) for many
jobs in one transaction; two flushes that lock the same counter or bucket rows in a
different order would deadlock, and PostgreSQL would abort one of them.
"""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.models import Job, ThroughputMinute
from boson_django.services import AckRequest, Outcome
from tests.concurrency.support import run_threads
from tests.factories import NOOP, envelope

FLUSHERS = 4
BATCH = 25


def _running(count: int, queue: str, **fields) -> list:
    """``count`` jobs admitted (running), their leases in admission order."""
    services.enqueue([envelope(NOOP, queue=queue, **fields) for _ in range(count)])
    leases = []
    while len(leases) < count:
        units = services.admit("w", [queue], 100)
        assert units, "fewer jobs admitted than enqueued"
        leases += [unit.lease for unit in units]
    return leases


def _flush_all(leases: list, make) -> None:
    """Split the leases among the flushers; each acks its share in batches of ``BATCH``."""
    def flusher(i: int) -> int:
        mine = leases[i::FLUSHERS]
        for start in range(0, len(mine), BATCH):
            replies = services.ack_many([make(lease) for lease in mine[start:start + BATCH]])
            assert all(reply.ok for reply in replies), [r.error for r in replies if not r.ok][:3]
        return len(mine)

    assert sum(run_threads(FLUSHERS, flusher)) == len(leases)


def _counted(outcome: str) -> int:
    return sum(ThroughputMinute.objects.filter(outcome=outcome).values_list("count", flat=True))


@pytest.mark.postgres
def test_concurrent_flushes_of_retries_neither_deadlock_nor_lose_a_count(live_clock):
    leases = _running(800, "storm", max_attempts=5)

    _flush_all(leases, lambda lease: AckRequest(lease, Outcome.RETRY, error="boom", delay_ms=60_000))

    assert Job.objects.filter(queue="storm", state="retryable").count() == 800
    assert _counted("retried") == 800


@pytest.mark.postgres
def test_concurrent_flushes_mixing_plain_and_general_acks_count_each_once(live_clock):
    """Plain successes (one statement) and the rest (per-ack transition code) in the same
    batches, from several flushers at once."""
    leases = _running(800, "mixed")
    kinds = [(Outcome.SUCCESS, ()), (Outcome.RETRY, ()), (Outcome.SKIP, ()), (Outcome.SUCCESS, ("noted",))]
    chosen = {lease.job_id: kinds[n % len(kinds)] for n, lease in enumerate(leases)}

    def make(lease):
        outcome, logs = chosen[lease.job_id]
        return AckRequest(lease, outcome, delay_ms=60_000 if outcome is Outcome.RETRY else None, logs=logs)

    _flush_all(leases, make)

    counts = services.counts("mixed")
    assert (counts["completed"], counts["retryable"], counts["skipped"]) == (400, 200, 200)
    assert (_counted("completed"), _counted("retried"), _counted("skipped")) == (400, 200, 200)


@pytest.mark.postgres
def test_concurrent_flushes_correcting_several_buckets_do_not_deadlock(live_clock):
    """Weight corrections for jobs of three rate classes, in every order within a batch:
    each flush locks the buckets in name order, not in the order its acks name them."""
    for name in ("a", "b", "c"):
        services.set_rate_limit(name, limit=100_000, window_ms=1000)
    leases = []
    for name in ("a", "b", "c"):
        leases += _running(200, "weights", rate_class=name)
    leases.sort(key=lambda lease: lease.job_id[::-1])  # classes interleaved in each batch

    _flush_all(leases, lambda lease: AckRequest(lease, Outcome.RETRY, delay_ms=60_000, actual_weight=0.5))

    assert services.counts("weights")["retryable"] == 600
    assert _counted("retried") == 600
    charged = set(Job.objects.filter(queue="weights").values_list("charged_weight", flat=True))
    assert charged == {0.5}
