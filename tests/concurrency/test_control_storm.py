"""Operators and workers at once: every control against every worker operation.

Three workers admit (rate classes, task caps), renew, release and ack in shuffled
batches with every outcome (weight corrections, RATE_LIMITED, retries); a sweeper steps
the store clock and promotes, reclaims and evicts; two operators cancel, retry and
release jobs from quarantine, retune rate limits, pause and resume a queue and rewrite
task configs. Nothing may fail (a deadlock raises) and the store must stay sound. It
found two bugs: two operators creating one rate limit (IntegrityError) and claims
stamped with a store time read before admission waited for locks.
"""

from __future__ import annotations

import random

import pytest

from boson_django import services
from boson_django.errors import LeaseRejected, UnknownJob
from boson_django.models import Job
from boson_django.services import AckRequest, Outcome
from tests.concurrency.support import run_threads
from tests.factories import ADD, NOOP, envelope

ROUNDS = 40
WORKERS = 3


def _outcome(rng: random.Random, lease) -> AckRequest:
    kind = rng.randrange(8)
    if kind == 0:
        return AckRequest(lease, Outcome.SUCCESS)
    if kind == 1:
        return AckRequest(lease, Outcome.SUCCESS, actual_weight=rng.choice([0.0, 0.5, 3.0]))
    if kind == 2:
        return AckRequest(lease, Outcome.RETRY, error="boom", delay_ms=rng.choice([1, 500]), actual_weight=1.5)
    if kind == 3:
        return AckRequest(lease, Outcome.RATE_LIMITED)
    if kind == 4:
        return AckRequest(lease, Outcome.SNOOZE, delay_ms=200)
    if kind == 5:
        return AckRequest(lease, Outcome.SKIP, logs=["skipped"])
    if kind == 6:
        return AckRequest(lease, Outcome.DISCARD, error="bad", actual_weight=0.0)
    return AckRequest(lease, Outcome.SUCCESS, logs=["ok"])


def _worker(i: int) -> None:
    """Admit, renew, release one in ten, ack the rest in one shuffled batch."""
    rng = random.Random(i)
    for _ in range(ROUNDS):
        units = services.admit(f"w{i}", ["mix", "mix2"], 8, lease_ms=rng.choice([300, 5_000]))
        leases = [u.lease for u in units]
        services.renew(leases, 5_000)
        keep = []
        for lease in leases:
            if rng.random() < 0.1:
                try:
                    services.release(lease)
                except LeaseRejected:
                    pass
            else:
                keep.append(lease)
        rng.shuffle(keep)
        services.ack_many([_outcome(rng, lease) for lease in keep])


def _sweeper(live_clock) -> None:
    for _ in range(ROUNDS):
        live_clock.advance(100)
        services.promote_due()
        services.reclaim_expired()
        services.evict_retained()


def _operator(i: int) -> None:
    """Controls on random jobs of the two queues, then one policy change."""
    rng = random.Random(100 + i)
    for _ in range(ROUNDS):
        ids = list(Job.objects.filter(queue__in=["mix", "mix2"]).values_list("id", flat=True)[:400])
        for job_id in rng.sample(ids, min(6, len(ids))):
            try:
                rng.choice([services.cancel, services.retry, services.release_quarantined])(job_id)
            except UnknownJob:
                pass
        what = rng.randrange(4)
        if what == 0:
            services.set_rate_limit(rng.choice(["a", "b", "c"]), rng.randrange(5, 50), 1_000, rng.randrange(0, 60))
        elif what == 1:
            services.pause_queue("mix2")
            services.resume_queue("mix2")
        else:
            services.set_task_config(rng.choice([NOOP, ADD]), max_active=rng.choice([None, 3, 20]),
                                     rate_class=rng.choice([None, "a", "c"]))


@pytest.mark.slow
def test_operators_and_workers_at_once(live_clock):
    services.set_task_config(NOOP, crash_limit=2)
    services.set_rate_limit("a", 40, 1_000)
    services.set_rate_limit("b", 40, 1_000, 80)
    envs = []
    for n in range(600):
        envs.append(envelope(
            NOOP if n % 3 else ADD, args=[n % 40, n % 7], queue="mix" if n % 5 else "mix2",
            rate_class=[None, "a", "b", "c"][n % 4], weight=float(n % 3),
            retention_ms=[0, 100, 60_000][n % 3], max_attempts=3, priority=n % 11 - 5,
        ))
    services.enqueue(envs)

    def actor(i: int) -> None:
        if i < WORKERS:
            _worker(i)
        elif i == WORKERS:
            _sweeper(live_clock)
        else:
            _operator(i)

    run_threads(WORKERS + 3, actor)

    problems = services.find_problems()
    assert not problems, [str(p) for p in problems]
