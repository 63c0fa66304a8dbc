"""SPEC section 2, the weights rule: admission charges the estimate; the ack corrects it
in the same atomic write as the transition."""

from __future__ import annotations

from datetime import timedelta

import pytest

from boson_django import services
from boson_django.errors import LeaseRejected
from boson_django.services import Outcome
from tests.factories import admit_one, enqueue_one
from tests.services.support import job_row, start_job

CLASS = "meter"


@pytest.fixture
def metered(store_clock):
    """A bucket of 10 tokens that does not refill within a test (the clock is frozen)."""
    services.set_rate_limit(CLASS, limit=10, window_ms=86_400_000, burst=10)
    return store_clock


def test_admission_charges_the_estimated_weight(metered):
    driven = start_job(rate_class=CLASS, weight=3)
    assert services.bucket_tokens(CLASS) == pytest.approx(7)
    assert job_row(driven.job_id)["charged_weight"] == pytest.approx(3)


@pytest.mark.parametrize(
    ("actual", "tokens_after"), [(None, 7), (3, 7), (1, 9), (0, 10), (5, 5)],
    ids=["none-is-exact", "same", "lighter", "zero-refunds-all", "heavier"],
)
@pytest.mark.parametrize("outcome", [Outcome.SUCCESS, Outcome.RETRY, Outcome.SKIP, Outcome.SNOOZE])
def test_ack_corrects_the_charge_with_the_actual_weight(metered, outcome, actual, tokens_after):
    driven = start_job(rate_class=CLASS, weight=3)
    delay = {"delay_ms": 10} if outcome is Outcome.SNOOZE else {}
    services.ack(driven.lease, outcome, actual_weight=actual, **delay)
    assert services.bucket_tokens(CLASS) == pytest.approx(tokens_after)
    assert job_row(driven.job_id)["charged_weight"] == pytest.approx(3 if actual is None else actual)


def test_a_refused_ack_does_not_correct_the_charge(metered):
    driven = start_job(rate_class=CLASS, weight=3)
    services.cancel(driven.job_id)
    tokens = services.bucket_tokens(CLASS)
    with pytest.raises(LeaseRejected):
        services.ack(driven.lease, Outcome.SUCCESS, actual_weight=0)
    assert services.bucket_tokens(CLASS) == pytest.approx(tokens)


def test_an_unconfigured_rate_class_is_unlimited_and_never_charged(store_clock):
    units = []
    for _ in range(3):
        units.append(start_job(rate_class="nobody-configured-this", weight=1_000))
    assert services.bucket_tokens("nobody-configured-this") is None
    services.ack(units[0].lease, Outcome.SUCCESS, actual_weight=0)
    assert services.bucket_tokens("nobody-configured-this") is None


def _bucket_writes(queries) -> int:
    return sum(1 for q in queries if q["sql"].lstrip().upper().startswith("UPDATE") and "boson_bucket" in q["sql"])


def test_one_flush_corrects_each_bucket_once_with_every_ack_in_it(metered):
    """Three acks of one class in one ack_many: all three corrections land (3 + 3 + 3
    charged, 1 + 0 + 2 used) with one write of the bucket, not one per ack."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from boson_django.services import AckRequest

    jobs = [start_job(rate_class=CLASS, weight=3) for _ in range(3)]
    assert services.bucket_tokens(CLASS) == pytest.approx(1)
    with CaptureQueriesContext(connection) as seen:
        replies = services.ack_many([
            AckRequest(jobs[0].lease, Outcome.SUCCESS, actual_weight=1),
            AckRequest(jobs[1].lease, Outcome.RETRY, actual_weight=0),
            AckRequest(jobs[2].lease, Outcome.SKIP, actual_weight=2),
        ])
    assert [r.ok for r in replies] == [True, True, True]
    assert services.bucket_tokens(CLASS) == pytest.approx(1 + 2 + 3 + 1)
    assert [job_row(j.job_id)["charged_weight"] for j in jobs] == pytest.approx([1, 0, 2])
    assert _bucket_writes(seen.captured_queries) == 1


def test_a_rate_limited_ack_waits_on_the_bucket_as_the_flush_left_it(metered):
    """A RATE_LIMITED ack without a delay, after a refund in the same flush: its wait is
    read from the refunded bucket, not from the row as it was before the flush."""
    from boson_django.services import AckRequest

    services.set_rate_limit(CLASS, limit=10, window_ms=10_000, burst=10)  # 1 token a second
    refunded, limited = start_job(rate_class=CLASS, weight=5), start_job(rate_class=CLASS, weight=5)
    assert services.bucket_tokens(CLASS) == pytest.approx(0)
    services.ack_many([
        AckRequest(refunded.lease, Outcome.SUCCESS, actual_weight=1),  # gives back 4
        AckRequest(limited.lease, Outcome.RATE_LIMITED),  # needs 5: 1 more, a second
    ])
    now = metered.now()
    row = job_row(limited.job_id)
    assert row["state"] == "scheduled"
    assert row["run_at"] - now == timedelta(milliseconds=1_001)


def test_a_job_heavier_than_its_bucket_runs_once_the_bucket_is_full_and_leaves_it_in_debt(metered):
    """A weight over the capacity (10) can never be held: the job is admitted when the
    bucket is full, and the bucket owes the difference, refilled at its rate."""
    heavy = enqueue_one(rate_class=CLASS, weight=15, queue="heavy", lease_ms=60_000)
    assert admit_one("w1", ["heavy"]).lease.job_id == heavy
    assert services.bucket_tokens(CLASS) == pytest.approx(-5)
    assert job_row(heavy)["charged_weight"] == pytest.approx(15)


def test_a_job_heavier_than_its_bucket_holds_its_class_only_until_the_bucket_is_full(store_clock):
    """First in claim order, the heavy job keeps its place in its class (the lighter job
    behind it waits, as behind any job short of tokens) until the bucket is full; then it
    runs, and the class goes on once the debt is refilled. Before, it waited for tokens
    the bucket could never hold, and its whole class with it."""
    services.set_rate_limit(CLASS, limit=10, window_ms=10_000)  # 10 tokens, one a second
    start_job(rate_class=CLASS, weight=4, queue="first")  # leaves 6
    heavy = enqueue_one(rate_class=CLASS, weight=12, queue="heavy", priority=10, lease_ms=60_000)
    light = enqueue_one(rate_class=CLASS, weight=1, queue="heavy", lease_ms=60_000)
    assert services.admit("w1", ["heavy"], 2) == []
    store_clock.advance(4_000)  # full
    assert [u.lease.job_id for u in services.admit("w1", ["heavy"], 2)] == [heavy]
    assert services.bucket_tokens(CLASS) == pytest.approx(-2)
    store_clock.advance(3_000)
    assert [u.lease.job_id for u in services.admit("w1", ["heavy"], 2)] == [light]


def test_a_rate_limited_job_heavier_than_its_bucket_waits_for_a_full_bucket(store_clock):
    """Its wait is until the bucket is full again (it can never hold 15 tokens)."""
    services.set_rate_limit(CLASS, limit=10, window_ms=10_000)  # 10 tokens, one a second
    driven = start_job(rate_class=CLASS, weight=15)
    services.ack(driven.lease, Outcome.RATE_LIMITED)
    assert services.bucket_tokens(CLASS) == pytest.approx(-5)
    assert job_row(driven.job_id)["run_at"] - store_clock.now() == timedelta(milliseconds=15_001)


def test_a_rate_limited_wait_past_the_longest_delay_is_the_longest_delay(store_clock):
    """A bucket of one token a century, 99 in debt after a job of 100, is full again in
    ten thousand years, past any date: the wait is the longest delay an ack may give."""
    from boson_django.validation import MAX_MS

    services.set_rate_limit(CLASS, limit=1, window_ms=MAX_MS)
    driven = start_job(rate_class=CLASS, weight=100)
    assert services.bucket_tokens(CLASS) == pytest.approx(-99)
    assert services.ack(driven.lease, Outcome.RATE_LIMITED) == "scheduled"
    assert job_row(driven.job_id)["run_at"] - store_clock.now() == timedelta(milliseconds=MAX_MS)
