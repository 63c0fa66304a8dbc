"""SPEC section 2, the enqueue rows and promote_due: where a new job starts, and when it
becomes available."""

from __future__ import annotations

from datetime import timedelta

from boson_django import services
from boson_django.models import QuarantinedFingerprint
from tests.factories import ADD, NOOP, enqueue_one, state_of
from tests.services.support import drive, job_row, run_rows, snapshot


def test_enqueue_without_run_at_is_available_with_zero_counters(store_clock):
    job_id = enqueue_one(NOOP)
    row = job_row(job_id)
    assert row["state"] == "available"
    assert (row["attempt"], row["crash_attempt"], row["fence"]) == (0, 0, 0)
    assert row["run_at"] == store_clock.now()
    assert row["lease_holder"] is None and row["lease_expires_at"] is None
    assert run_rows(job_id) == [] and services.errors(job_id) == []


def test_enqueue_with_run_at_now_is_available(store_clock):
    job_id = enqueue_one(NOOP, run_at=store_clock.now())
    assert state_of(job_id) == "available"


def test_enqueue_with_run_at_in_the_past_is_available(store_clock):
    job_id = enqueue_one(NOOP, run_at=store_clock.now() - timedelta(days=1))
    assert state_of(job_id) == "available"


def test_enqueue_with_run_at_one_ms_ahead_is_scheduled(store_clock):
    run_at = store_clock.now() + timedelta(milliseconds=1)
    job_id = enqueue_one(NOOP, run_at=run_at)
    row = job_row(job_id)
    assert row["state"] == "scheduled"
    assert row["run_at"] == run_at
    assert (row["attempt"], row["crash_attempt"], row["fence"]) == (0, 0, 0)
    assert run_rows(job_id) == [] and services.errors(job_id) == []


def test_scheduled_job_is_not_admitted_before_promotion(store_clock):
    enqueue_one(NOOP, queue="later", run_at=store_clock.now() + timedelta(seconds=1))
    assert services.admit("w1", ["later"], 10) == []


def test_enqueue_of_a_quarantined_fingerprint_parks_with_a_record(store_clock):
    poisoned = drive("quarantined", store_clock)
    job_id = enqueue_one(NOOP, queue="walk")
    row = job_row(job_id)
    assert row["state"] == "quarantined"
    assert row["fingerprint"] == job_row(poisoned.job_id)["fingerprint"]
    (why,) = services.errors(job_id)
    assert why.outcome == "quarantined"
    assert row["fingerprint"] in why.error and poisoned.job_id in why.error
    assert services.admit("w1", ["walk"], 10) == []


def test_enqueue_of_a_quarantined_fingerprint_parks_even_when_scheduled(store_clock):
    drive("quarantined", store_clock)
    job_id = enqueue_one(NOOP, queue="walk", run_at=store_clock.now() + timedelta(hours=1))
    assert state_of(job_id) == "quarantined"
    store_clock.advance(2 * 3_600_000)
    assert services.promote_due(10) == 0
    assert state_of(job_id) == "quarantined"


def test_explicit_fingerprint_is_what_quarantine_matches(store_clock):
    QuarantinedFingerprint.objects.create(
        fingerprint="fp-poison", task=ADD, job_id="gone", quarantined_at=store_clock.now()
    )
    parked = enqueue_one(ADD, args=[1, 2], fingerprint="fp-poison")
    free = enqueue_one(ADD, args=[1, 2])
    assert state_of(parked) == "quarantined"
    assert state_of(free) == "available"


def test_other_arguments_are_not_parked_by_a_quarantined_fingerprint(store_clock):
    drive("quarantined", store_clock)
    job_id = enqueue_one(NOOP, queue="walk", kwargs={})
    other = enqueue_one(ADD, queue="walk", args=[1, 2])
    assert state_of(job_id) == "quarantined"
    assert state_of(other) == "available"


def test_parking_lasts_until_an_operator_releases_the_fingerprint(store_clock):
    poisoned = drive("quarantined", store_clock)
    parked = enqueue_one(NOOP, queue="walk")
    store_clock.advance(30 * 86_400_000)
    assert services.evict_retained(100) == 0
    assert state_of(enqueue_one(NOOP, queue="walk")) == "quarantined"
    assert services.release_quarantined(poisoned.job_id) is True
    assert state_of(parked) == "available"
    assert state_of(enqueue_one(NOOP, queue="walk")) == "available"


def test_promote_moves_a_due_scheduled_job_and_nothing_else(store_clock):
    run_at = store_clock.now() + timedelta(milliseconds=500)
    job_id = enqueue_one(NOOP, run_at=run_at)
    store_clock.advance(499)
    before = snapshot(job_id)
    assert services.promote_due(10) == 0
    assert snapshot(job_id) == before
    store_clock.advance(1)
    assert services.promote_due(10) == 1
    row = job_row(job_id)
    assert row["state"] == "available"
    assert row["run_at"] == run_at
    assert (row["attempt"], row["crash_attempt"], row["fence"]) == (0, 0, 0)
    assert services.errors(job_id) == []


def test_promote_moves_a_due_retryable_job_keeping_its_counters(store_clock):
    driven = drive("retryable", store_clock)
    before = job_row(driven.job_id)
    store_clock.freeze(before["run_at"] - timedelta(milliseconds=1))
    assert services.promote_due(10) == 0
    store_clock.advance(1)
    assert services.promote_due(10) == 1
    after = job_row(driven.job_id)
    assert after["state"] == "available"
    for field in ("attempt", "crash_attempt", "fence", "run_at"):
        assert after[field] == before[field]
    assert len(services.errors(driven.job_id)) == 1


def test_promote_is_bounded_by_limit(store_clock):
    ids = [enqueue_one(NOOP, run_at=store_clock.now() + timedelta(seconds=1)) for _ in range(5)]
    store_clock.advance(1_000)
    assert services.promote_due(2) == 2
    assert services.promote_due(10) == 3
    assert {state_of(i) for i in ids} == {"available"}
    assert services.promote_due(10) == 0
