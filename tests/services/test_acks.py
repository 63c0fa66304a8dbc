"""SPEC section 2, the ack rows: one test per outcome row, each paired with a refusal."""

from __future__ import annotations

from datetime import timedelta

import pytest

from boson_django import services
from boson_django.errors import InvalidEnvelope, LeaseRejected
from boson_django.services import Outcome
from tests.factories import EPHEMERAL, NOOP, state_of
from tests.services.support import start_job, drive, job_row, recorded, run_rows, snapshot


def _counters(job_id: str) -> tuple[int, int, int]:
    row = job_row(job_id)
    return row["attempt"], row["crash_attempt"], row["fence"]


# --- SUCCESS -------------------------------------------------------------------------


def test_success_completes_a_running_job(store_clock):
    driven = start_job()
    assert services.ack(driven.lease, Outcome.SUCCESS) == "completed"
    row = job_row(driven.job_id)
    assert row["state"] == "completed"
    assert _counters(driven.job_id) == (1, 0, 1)
    assert row["finalized_at"] == store_clock.now()
    assert row["lease_holder"] is None and row["lease_expires_at"] is None


def test_success_does_not_complete_a_retryable_job(store_clock):
    driven = drive("retryable", store_clock)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected):
        services.ack(driven.lease, Outcome.SUCCESS)
    assert snapshot(driven.job_id) == before


def test_success_without_logs_adds_no_attempt_record(store_clock):
    driven = start_job()
    services.ack(driven.lease, Outcome.SUCCESS)
    assert services.errors(driven.job_id) == []
    (run,) = run_rows(driven.job_id)
    assert run["finished_at"] == store_clock.now() and run["outcome"] == "success"


def test_success_with_logs_records_the_attempt_with_its_logs(store_clock):
    driven = start_job()
    services.ack(driven.lease, Outcome.SUCCESS, logs=["step 1", "step 2"])
    (record,) = services.errors(driven.job_id)
    assert (record.outcome, record.attempt, record.fence, record.logs) == ("success", 1, 1, ["step 1", "step 2"])


def test_success_stores_the_result_stamped_with_attempt_and_fence(store_clock):
    driven = start_job()
    services.ack(driven.lease, Outcome.SUCCESS, result={"sum": 3})
    result = services.get_result(driven.job_id)
    assert (result.data, result.attempt, result.fence, result.at) == ({"sum": 3}, 1, 1, store_clock.now())


def test_success_with_retention_zero_deletes_the_job(store_clock):
    driven = start_job(retention_ms=0)
    assert services.ack(driven.lease, Outcome.SUCCESS, result=1, logs=["x"]) is None
    assert services.job_state(driven.job_id) is None
    assert job_row(driven.job_id) is None and run_rows(driven.job_id) == []
    assert services.get_result(driven.job_id) is None


def test_success_of_a_task_whose_code_default_retention_is_zero_deletes_it(store_clock):
    driven = start_job(task=EPHEMERAL, retention_ms=None)
    services.ack(driven.lease, Outcome.SUCCESS)
    assert services.job_state(driven.job_id) is None


def test_success_with_retention_keeps_the_job(store_clock):
    driven = start_job(retention_ms=1)
    services.ack(driven.lease, Outcome.SUCCESS)
    assert state_of(driven.job_id) == "completed"


# --- RETRY ---------------------------------------------------------------------------


def test_retry_with_attempts_left_makes_the_job_retryable_at_now_plus_delay(store_clock):
    driven = start_job(max_attempts=3)
    assert services.ack(driven.lease, Outcome.RETRY, delay_ms=7_000, error="E: boom", logs=["a"]) == "retryable"
    row = job_row(driven.job_id)
    assert row["run_at"] == store_clock.now() + timedelta(milliseconds=7_000)
    assert _counters(driven.job_id) == (1, 0, 1)
    assert row["finalized_at"] is None
    (record,) = services.errors(driven.job_id)
    assert (record.outcome, record.error, record.logs, record.attempt) == ("retry", "E: boom", ["a"], 1)


def test_retry_does_not_retry_a_completed_job(store_clock):
    driven = drive("completed", store_clock)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected):
        services.ack(driven.lease, Outcome.RETRY, error="late")
    assert snapshot(driven.job_id) == before


def test_the_retry_that_brings_attempt_to_max_attempts_fails(store_clock):
    driven = start_job(max_attempts=2)
    assert services.ack(driven.lease, Outcome.RETRY, delay_ms=0) == "retryable"
    services.promote_due(10)
    second = services.admit("w1", ["walk"], 1)[0]
    assert second.attempt == 1
    assert services.ack(second.lease, Outcome.RETRY, error="again") == "failed"
    row = job_row(driven.job_id)
    assert _counters(driven.job_id) == (2, 0, 2)
    assert row["finalized_at"] == store_clock.now()
    assert recorded(driven.job_id) == ["retry", "retry"]


def test_retry_with_max_attempts_one_fails_at_once(store_clock):
    driven = start_job(max_attempts=1)
    assert services.ack(driven.lease, Outcome.RETRY) == "failed"
    assert _counters(driven.job_id) == (1, 0, 1)
    assert recorded(driven.job_id) == ["retry"]


# --- SNOOZE and RATE_LIMITED ---------------------------------------------------------


def test_snooze_schedules_at_now_plus_delay_without_spending_an_attempt(store_clock):
    driven = start_job()
    assert services.ack(driven.lease, Outcome.SNOOZE, delay_ms=2_500) == "scheduled"
    row = job_row(driven.job_id)
    assert row["run_at"] == store_clock.now() + timedelta(milliseconds=2_500)
    assert _counters(driven.job_id) == (0, 0, 1)
    assert services.errors(driven.job_id) == []
    store_clock.advance(2_499)
    assert services.promote_due(10) == 0
    store_clock.advance(1)
    assert services.promote_due(10) == 1


@pytest.mark.parametrize("delay_ms", [None, 0, -5])
def test_snooze_requires_a_positive_delay_and_writes_nothing(store_clock, delay_ms):
    driven = start_job()
    before = snapshot(driven.job_id)
    with pytest.raises(InvalidEnvelope, match="delay_ms"):
        services.ack(driven.lease, Outcome.SNOOZE, delay_ms=delay_ms)
    assert snapshot(driven.job_id) == before


def test_snooze_does_not_reschedule_a_scheduled_job(store_clock):
    driven = drive("scheduled", store_clock)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected):
        services.ack(driven.lease, Outcome.SNOOZE, delay_ms=1)
    assert snapshot(driven.job_id) == before


def test_rate_limited_with_delay_schedules_at_now_plus_delay(store_clock):
    driven = start_job()
    assert services.ack(driven.lease, Outcome.RATE_LIMITED, delay_ms=1_500) == "scheduled"
    assert job_row(driven.job_id)["run_at"] == store_clock.now() + timedelta(milliseconds=1_500)
    assert _counters(driven.job_id) == (0, 0, 1)
    assert services.errors(driven.job_id) == []


def test_rate_limited_without_delay_waits_for_the_bucket_to_refill(store_clock):
    services.set_rate_limit("slow", limit=1, window_ms=10_000)
    driven = start_job(rate_class="slow", weight=1)
    assert services.bucket_tokens("slow") == 0
    assert services.ack(driven.lease, Outcome.RATE_LIMITED) == "scheduled"
    wait = job_row(driven.job_id)["run_at"] - store_clock.now()
    assert timedelta(0) < wait <= timedelta(milliseconds=10_001)
    store_clock.advance(wait // timedelta(milliseconds=1) - 1)
    assert services.promote_due(10) == 0
    store_clock.advance(1)
    assert services.promote_due(10) == 1
    assert services.admit("w1", ["walk"], 1)[0].lease.job_id == driven.job_id
    assert services.errors(driven.job_id) == []


def test_rate_limited_without_delay_or_bucket_still_waits(store_clock):
    driven = start_job()
    services.ack(driven.lease, Outcome.RATE_LIMITED)
    assert state_of(driven.job_id) == "scheduled"
    assert job_row(driven.job_id)["run_at"] > store_clock.now()


# --- SKIP, UNDECODABLE, DISCARD, REVOKE ----------------------------------------------


def test_skip_finishes_the_job_as_skipped_with_a_record(store_clock):
    driven = start_job()
    assert services.ack(driven.lease, Outcome.SKIP, error="nothing to do") == "skipped"
    assert _counters(driven.job_id) == (1, 0, 1)
    assert job_row(driven.job_id)["finalized_at"] == store_clock.now()
    assert recorded(driven.job_id) == ["skip"]


@pytest.mark.parametrize("outcome", [Outcome.UNDECODABLE, Outcome.DISCARD])
def test_undecodable_and_discard_fail_without_retry_even_with_attempts_left(store_clock, outcome):
    driven = start_job(max_attempts=20)
    assert services.ack(driven.lease, outcome, error="bad payload") == "failed"
    assert _counters(driven.job_id) == (1, 0, 1)
    (record,) = services.errors(driven.job_id)
    assert (record.outcome, record.error) == (outcome.value, "bad payload")
    store_clock.advance(3_600_000)
    assert services.promote_due(10) == 0
    assert state_of(driven.job_id) == "failed"


@pytest.mark.parametrize("outcome", [Outcome.SKIP, Outcome.UNDECODABLE, Outcome.DISCARD, Outcome.REVOKE])
def test_finishing_outcomes_do_not_touch_an_available_job(store_clock, outcome):
    driven = drive("available", store_clock)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected):
        services.ack(driven.lease, outcome)
    assert snapshot(driven.job_id) == before


def test_revoke_deletes_the_job_and_its_runs(store_clock):
    driven = start_job()
    services.write_output(driven.lease, {"partial": True})
    assert services.ack(driven.lease, Outcome.REVOKE, logs=["gone"]) is None
    assert services.job_state(driven.job_id) is None
    assert run_rows(driven.job_id) == [] and services.errors(driven.job_id) == []
    assert services.get_output(driven.job_id) is None
    assert all(env.id != driven.job_id for env in services.all_enqueued())


# --- LEASE_LOST is never acked -------------------------------------------------------


def test_lease_lost_is_refused_by_ack_and_changes_nothing(store_clock):
    driven = start_job()
    before = snapshot(driven.job_id)
    with pytest.raises(InvalidEnvelope, match="LEASE_LOST|lease_lost"):
        services.ack(driven.lease, Outcome.LEASE_LOST)
    with pytest.raises(InvalidEnvelope):
        services.ack(driven.lease, "lease_lost")
    assert snapshot(driven.job_id) == before
    assert services.renew([driven.lease], 1_000) == []


def test_a_second_ack_of_the_same_lease_is_refused(store_clock):
    driven = start_job()
    services.ack(driven.lease, Outcome.SKIP)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected):
        services.ack(driven.lease, Outcome.SUCCESS)
    assert snapshot(driven.job_id) == before


def test_a_job_acked_retry_runs_again_with_the_spent_attempt(store_clock):
    driven = start_job(task=NOOP, max_attempts=3)
    services.ack(driven.lease, Outcome.RETRY, delay_ms=10)
    store_clock.advance(10)
    services.promote_due(10)
    unit = services.admit("w2", ["walk"], 1)[0]
    assert (unit.attempt, unit.lease.fence) == (1, 2)
    assert services.ack(unit.lease, Outcome.SUCCESS) == "completed"
    assert _counters(driven.job_id) == (2, 0, 2)
