"""Concurrent admitters: each job claimed once per fence, buckets and max_active hold."""

from __future__ import annotations

import random
import threading

import pytest

from boson_django import services
from boson_django.models import Job
from boson_django.services import Outcome
from tests.concurrency.support import assert_each_admitted_once, run_threads
from tests.factories import ADD, NOOP, envelope

ADMITTERS = 8


def _drain(worker: str, queue: str, batch: int, on_admit=None) -> list[str]:
    """Admit and ack SUCCESS until the queue has nothing available; the ids this worker got."""
    mine: list[str] = []
    for _ in range(10_000):
        units = services.admit(worker, [queue], batch)
        if not units:
            if not Job.objects.filter(queue=queue, state="available").exists():
                return mine
            continue
        if on_admit:
            on_admit(units)
        for unit in units:
            services.ack(unit.lease, Outcome.SUCCESS)
        mine += [unit.lease.job_id for unit in units]
    raise AssertionError(f"{worker} never saw {queue} drained")


@pytest.mark.slow
@pytest.mark.postgres
def test_eight_admitters_drain_two_thousand_jobs_each_exactly_once(live_clock):
    results = services.enqueue([envelope(NOOP, queue="drain") for _ in range(2000)])
    job_ids = [r.id for r in results]

    got = run_threads(ADMITTERS, lambda i: _drain(f"w{i}", "drain", 25))

    flat = [job_id for mine in got for job_id in mine]
    assert len(flat) == len(set(flat)) == 2000, "a job was handed to two admitters"
    assert set(flat) == set(job_ids)
    assert sum(1 for mine in got if mine) >= 2, "the admitters did not actually run concurrently"
    assert services.counts("drain")["completed"] == 2000
    assert_each_admitted_once(job_ids, fence=1)


def _admit_until_empty(queue: str, batch: int) -> int:
    def admitter(i: int) -> int:
        total = 0
        while units := services.admit(f"w{i}", [queue], batch):
            total += len(units)
        return total

    return sum(run_threads(ADMITTERS, admitter))


def test_bucket_never_admits_more_than_its_limit_per_window(live_clock):
    services.set_rate_limit("conc", limit=10, window_ms=1000, burst=0)
    services.enqueue([envelope(NOOP, queue="rl", rate_class="conc") for _ in range(120)])

    assert _admit_until_empty("rl", 3) == 10, "a full bucket holds exactly `limit` tokens"
    assert _admit_until_empty("rl", 3) == 0, "no refill while the store clock stands still"
    live_clock.advance(1000)
    assert _admit_until_empty("rl", 3) == 10, "one window refills `limit` tokens"
    live_clock.advance(500)
    assert _admit_until_empty("rl", 3) == 5, "half a window refills half"
    live_clock.advance(60_000)
    assert _admit_until_empty("rl", 3) == 10, "refill is capped at capacity"
    assert services.counts("rl")["running"] == 35


def test_bucket_burst_caps_capacity_and_weights_are_charged(live_clock):
    services.set_rate_limit("bursty", limit=4, window_ms=1000, burst=12)
    services.enqueue([envelope(NOOP, queue="bq", rate_class="bursty", weight=2) for _ in range(60)])

    assert _admit_until_empty("bq", 2) == 6, "burst 12 tokens at weight 2"
    live_clock.advance(1000)
    assert _admit_until_empty("bq", 2) == 2, "4 tokens per window at weight 2"
    live_clock.advance(10_000)
    assert _admit_until_empty("bq", 2) == 6, "refill stops at burst"


def test_max_active_holds_under_concurrent_admitters(live_clock):
    services.set_task_config(ADD, max_active=2)
    services.enqueue(
        [envelope(ADD, queue="cap", args=[i, i]) for i in range(30)]
        + [envelope(NOOP, queue="cap") for _ in range(30)]
    )

    first = run_threads(ADMITTERS, lambda i: services.admit(f"w{i}", ["cap"], 5))
    tasks = [u.envelope.task for units in first for u in units]
    assert tasks.count(ADD) == 2, "max_active=2 admitted a different number at once"
    assert tasks.count(NOOP) == 30, "a capped task must not block other tasks"
    for units in first:
        for unit in units:
            services.ack(unit.lease, Outcome.SUCCESS)

    held, peak, lock = [0], [0], threading.Lock()

    def on_admit(units) -> None:
        running = Job.objects.filter(task=ADD, state="running").count()
        assert running <= 2, f"{running} {ADD} jobs running with max_active=2"
        with lock:
            held[0] += sum(1 for u in units if u.envelope.task == ADD)
            peak[0] = max(peak[0], held[0])

    def worker(i: int) -> int:
        done = 0
        for _ in range(10_000):
            units = services.admit(f"w{i}", ["cap"], 2)
            if not units and not Job.objects.filter(queue="cap", state__in=["available", "running"]).exists():
                return done
            on_admit(units)
            for unit in units:
                with lock:
                    held[0] -= 1
                services.ack(unit.lease, Outcome.SUCCESS)
                done += 1
        raise AssertionError("never drained")

    assert sum(run_threads(ADMITTERS, worker)) == 28
    assert 1 <= peak[0] <= 2
    assert services.counts("cap")["completed"] == 60


@pytest.mark.slow
@pytest.mark.postgres
def test_mixed_rate_classes_and_caps_admit_without_deadlock(live_clock):
    """Admitters that lock buckets and TaskConfig rows in different rounds must not deadlock."""
    rng = random.Random(7)
    for name in ("a", "b", "c"):
        services.set_rate_limit(name, limit=40, window_ms=1000, burst=0)
    services.set_task_config(ADD, max_active=3)
    services.enqueue([
        envelope(task, queue="mix", args=[i, i] if task == ADD else [],
                 rate_class=rng.choice(["a", "b", "c", None]), priority=rng.randint(-5, 5))
        for i, task in enumerate(rng.choice([ADD, NOOP]) for _ in range(400))
    ])

    def worker(i: int) -> int:
        done = 0
        for _ in range(2_000):
            units = services.admit(f"w{i}", ["mix"], rng.randint(1, 6))
            for unit in units:
                services.ack(unit.lease, Outcome.SUCCESS)
            done += len(units)
            if not units and not Job.objects.filter(queue="mix", state="available").exists():
                return done
            if not units:
                with step_lock:
                    if not Job.objects.filter(queue="mix", state="running").exists():
                        live_clock.advance(1000)
        raise AssertionError("never drained")

    step_lock = threading.Lock()
    assert sum(run_threads(ADMITTERS, worker)) == 400
    assert services.counts("mix")["completed"] == 400
    assert_each_admitted_once(list(Job.objects.values_list("id", flat=True)), fence=1)
