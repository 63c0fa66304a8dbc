"""SPEC section 2, the operator rows: cancel (also of a running job), release from
quarantine and operator retry, with SPEC section 3's control return values."""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.errors import LeaseRejected, UnknownJob
from boson_django.models import QuarantinedFingerprint
from boson_django.services import Outcome
from tests.factories import state_of
from tests.services.support import LEASE_MS, drive, job_row, recorded, snapshot, start_job


def _same_counters(before: dict, after: dict, *fields: str) -> None:
    for field in fields:
        assert after[field] == before[field], field


# --- cancel --------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["scheduled", "available", "retryable"])
def test_cancel_cancels_a_pending_job_with_a_record(store_clock, state):
    driven = drive(state, store_clock)
    before = job_row(driven.job_id)
    records = recorded(driven.job_id)
    assert services.cancel(driven.job_id) is True
    after = job_row(driven.job_id)
    assert after["state"] == "cancelled"
    _same_counters(before, after, "attempt", "crash_attempt", "fence")
    assert after["finalized_at"] == store_clock.now()
    assert recorded(driven.job_id) == records + ["cancelled"]
    assert services.admit("w9", [], 10) == []


@pytest.mark.parametrize("state", ["completed", "skipped", "failed", "cancelled"])
def test_cancel_does_not_cancel_a_finished_job(store_clock, state):
    driven = drive(state, store_clock)
    before = snapshot(driven.job_id)
    assert services.cancel(driven.job_id) is False
    assert snapshot(driven.job_id) == before


def test_cancel_does_not_cancel_a_quarantined_job(store_clock):
    driven = drive("quarantined", store_clock)
    before = snapshot(driven.job_id)
    assert services.cancel(driven.job_id) is False
    assert snapshot(driven.job_id) == before


def test_cancelling_a_running_job_revokes_the_holders_lease(store_clock):
    driven = start_job()
    assert services.cancel(driven.job_id) is True
    assert services.renew([driven.lease], LEASE_MS) == [driven.job_id]
    for write in (
        lambda: services.checkpoint(driven.lease, 1),
        lambda: services.write_output(driven.lease, 1),
        lambda: services.write_progress(driven.lease, 1),
        lambda: services.ack(driven.lease, Outcome.SUCCESS, result=1),
        lambda: services.release(driven.lease),
    ):
        with pytest.raises(LeaseRejected):
            write()
    row = job_row(driven.job_id)
    assert row["state"] == "cancelled"
    assert (row["attempt"], row["crash_attempt"], row["fence"]) == (0, 0, 1)
    assert row["lease_holder"] is None and row["lease_expires_at"] is None
    (record,) = services.errors(driven.job_id)
    assert (record.outcome, record.fence, record.attempt) == ("cancelled", 1, 1)
    assert services.get_result(driven.job_id) is None


def test_a_cancelled_running_job_stays_cancelled_after_its_holder_dies(store_clock):
    driven = start_job()
    services.cancel(driven.job_id)
    store_clock.advance(10 * LEASE_MS)
    assert services.reclaim_expired(10) == []
    assert services.promote_due(10) == 0
    assert state_of(driven.job_id) == "cancelled"
    assert job_row(driven.job_id)["crash_attempt"] == 0


@pytest.mark.parametrize(
    "control", [services.cancel, services.retry, services.release_quarantined], ids=lambda f: f.__name__
)
def test_control_functions_raise_unknown_job_for_a_missing_id(store_clock, control):
    with pytest.raises(UnknownJob):
        control("no-such-job")


def test_job_state_is_none_for_a_missing_id(store_clock):
    assert services.job_state("no-such-job") is None


# --- release from quarantine ---------------------------------------------------------


def test_release_quarantined_makes_the_job_available_and_clears_the_fingerprint(store_clock):
    driven = drive("quarantined", store_clock)
    before = job_row(driven.job_id)
    assert QuarantinedFingerprint.objects.filter(fingerprint=before["fingerprint"]).exists()
    assert services.release_quarantined(driven.job_id) is True
    after = job_row(driven.job_id)
    assert (after["state"], after["crash_attempt"]) == ("available", 0)
    _same_counters(before, after, "attempt", "fence")
    assert not QuarantinedFingerprint.objects.filter(fingerprint=before["fingerprint"]).exists()
    assert recorded(driven.job_id) == ["lease_lost", recorded(driven.job_id)[-1]]
    assert services.errors(driven.job_id)[-1].at == store_clock.now()
    unit = services.admit("w2", ["walk"], 1)[0]
    assert (unit.lease.job_id, unit.crash_attempt, unit.lease.fence) == (driven.job_id, 0, 2)


@pytest.mark.parametrize("state", ["available", "running", "failed", "cancelled"])
def test_release_quarantined_does_not_release_a_job_that_is_not_quarantined(store_clock, state):
    driven = drive(state, store_clock)
    before = snapshot(driven.job_id)
    assert services.release_quarantined(driven.job_id) is False
    assert snapshot(driven.job_id) == before


# --- operator retry ------------------------------------------------------------------


@pytest.mark.parametrize("state", ["failed", "cancelled"])
def test_retry_makes_a_failed_or_cancelled_job_available_with_a_record(store_clock, state):
    driven = drive(state, store_clock)
    before = job_row(driven.job_id)
    records = recorded(driven.job_id)
    assert services.retry(driven.job_id) is True
    after = job_row(driven.job_id)
    assert after["state"] == "available"
    _same_counters(before, after, "attempt", "crash_attempt", "fence")
    assert after["finalized_at"] is None
    assert len(recorded(driven.job_id)) == len(records) + 1
    unit = services.admit("w2", ["walk"], 1)[0]
    assert unit.lease.fence == before["fence"] + 1
    assert services.ack(unit.lease, Outcome.SUCCESS) == "completed"


def test_retry_keeps_the_crash_count(store_clock):
    driven = start_job()
    store_clock.advance(LEASE_MS)
    services.reclaim_expired(10)
    again = services.admit("w1", ["walk"], 1)[0]
    services.ack(again.lease, Outcome.DISCARD)
    assert services.retry(driven.job_id) is True
    assert job_row(driven.job_id)["crash_attempt"] == 1


def test_retry_gives_a_job_that_spent_its_attempts_another_run(store_clock):
    driven = start_job(max_attempts=1)
    assert services.ack(driven.lease, Outcome.RETRY) == "failed"
    assert services.retry(driven.job_id) is True
    unit = services.admit("w2", ["walk"], 1)[0]
    assert unit.attempt == 1
    assert services.ack(unit.lease, Outcome.SUCCESS) == "completed"
    assert job_row(driven.job_id)["attempt"] == 2


@pytest.mark.parametrize("state", ["scheduled", "available", "running", "retryable", "completed", "skipped", "quarantined"])
def test_retry_does_not_retry_a_job_that_is_not_failed_or_cancelled(store_clock, state):
    driven = drive(state, store_clock)
    before = snapshot(driven.job_id)
    assert services.retry(driven.job_id) is False
    assert snapshot(driven.job_id) == before


def test_retry_refuses_when_a_newer_live_job_holds_the_unique_key(store_clock):
    """A failed job's key may have been taken by a newer job; retrying must not duplicate it."""
    from boson_django import services
    from boson_django.models import Job, Run
    from tests.factories import admit_one, enqueue_one

    old = enqueue_one(queue="uk", unique_key="k1", max_attempts=1)
    unit = admit_one("w1", ["uk"])
    services.ack(unit.lease, "retry", error="x")
    assert Job.objects.get(id=old).state == "failed"
    newer = enqueue_one(queue="uk", unique_key="k1")
    runs_before = Run.objects.filter(job_id=old).count()
    assert services.retry(old) is False
    assert Job.objects.get(id=old).state == "failed"
    assert Run.objects.filter(job_id=old).count() == runs_before
    services.cancel(newer)
    assert services.retry(old) is True
    assert Job.objects.get(id=old).state == "available"
