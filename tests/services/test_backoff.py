"""SPEC section 2, the backoff rule for RETRY without delay_ms:
``min(retry_cap_ms, retry_base_ms * 2**(attempt-1))`` with jitter within that bound.

Delays are measured as ``run_at - now`` on the frozen store clock; jobs are stepped
through their retries by advancing it, never by sleeping.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings

from boson_django import policies, services
from boson_django.services import Outcome
from tests.factories import NOOP, enqueue_one
from tests.services.support import job_row

BASE, CAP = 1_000, 5_000
JOBS = 24
ROUNDS = 6


@pytest.fixture
def boson_backoff():
    with override_settings(BOSON={**settings.BOSON, "RETRY_BASE_MS": BASE, "RETRY_CAP_MS": CAP}):
        yield


def _delays_by_attempt(store_clock, jobs: int, rounds: int) -> dict[int, list[int]]:
    """Run ``jobs`` jobs through ``rounds`` RETRY acks each; the delay each retry got."""
    for i in range(jobs):
        enqueue_one(NOOP, queue="backoff", args=[i], max_attempts=100)
    delays: dict[int, list[int]] = {}
    for attempt in range(1, rounds + 1):
        units = services.admit("w1", ["backoff"], jobs)
        assert len(units) == jobs
        now = store_clock.now()
        for unit in units:
            services.ack(unit.lease, Outcome.RETRY, error="again")
            wait = job_row(unit.lease.job_id)["run_at"] - now
            delays.setdefault(attempt, []).append(wait // timedelta(milliseconds=1))
        store_clock.advance(CAP)
        assert services.promote_due(1_000) == jobs
    return delays


def test_first_retry_delay_is_bounded_by_retry_base_ms(store_clock, boson_backoff):
    delays = _delays_by_attempt(store_clock, JOBS, 1)
    assert all(0 <= d <= BASE for d in delays[1])


def test_each_retry_delay_is_within_its_capped_exponential_bound(store_clock, boson_backoff):
    delays = _delays_by_attempt(store_clock, JOBS, ROUNDS)
    for attempt, seen in delays.items():
        bound = min(CAP, BASE * 2 ** (attempt - 1))
        assert all(0 <= d <= bound for d in seen), (attempt, seen)


def test_delays_grow_with_the_attempt(store_clock, boson_backoff):
    delays = _delays_by_attempt(store_clock, JOBS, 3)
    assert max(delays[2]) > BASE
    assert max(delays[3]) > 2 * BASE
    assert sum(delays[3]) > sum(delays[2]) > sum(delays[1])


def test_delays_stop_growing_at_the_cap(store_clock, boson_backoff):
    delays = _delays_by_attempt(store_clock, JOBS, ROUNDS)
    late = delays[5] + delays[6]  # bounds 16s and 32s, both capped at 5s
    assert max(late) <= CAP
    assert max(late) > CAP // 2


def test_jitter_spreads_jobs_retrying_at_the_same_attempt(store_clock, boson_backoff):
    delays = _delays_by_attempt(store_clock, JOBS, 2)
    assert len(set(delays[1])) > 1
    assert len(set(delays[2])) > 1


def test_an_explicit_delay_overrides_backoff(store_clock, boson_backoff):
    job_id = enqueue_one(NOOP, queue="backoff", max_attempts=5)
    unit = services.admit("w1", ["backoff"], 1)[0]
    services.ack(unit.lease, Outcome.RETRY, delay_ms=123_456)
    assert job_row(job_id)["run_at"] == store_clock.now() + timedelta(milliseconds=123_456)


def test_the_cap_applies_to_the_first_retry_too(store_clock):
    with override_settings(BOSON={**settings.BOSON, "RETRY_BASE_MS": 10_000, "RETRY_CAP_MS": 300}):
        delays = _delays_by_attempt(store_clock, 8, 1)
    assert all(0 <= d <= 300 for d in delays[1])


@pytest.mark.parametrize(
    ("attempt", "bound"), [(1, 1_000), (2, 2_000), (3, 4_000), (4, 5_000), (80, 5_000)]
)
def test_the_pure_bound(attempt, bound):
    assert policies.backoff_bound_ms(attempt, BASE, CAP) == bound
