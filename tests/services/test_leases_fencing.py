"""SPEC section 2, the fencing rule: every write under a lease (ack, checkpoint, output,
progress, result, release) needs the caller's fence, a running job and an unexpired lease
on the store clock; otherwise ``LeaseRejected`` and no partial write. ``renew`` reports
lost leases instead of raising. Also the ``running -> available`` graceful release row.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from collections.abc import Callable

import pytest

from boson_django import services
from boson_django.errors import LeaseRejected
from boson_django.services import LeaseRef, Outcome
from tests.factories import NOOP, envelope, state_of
from tests.services.support import LEASE_MS, job_row, recorded, run_rows, snapshot, sqlite_binding_at_most, start_job

WRITES: dict[str, Callable[[Any], Any]] = {
    "ack-success": lambda lease: services.ack(lease, Outcome.SUCCESS, logs=["stale"], actual_weight=0),
    "ack-retry": lambda lease: services.ack(lease, Outcome.RETRY, error="stale", logs=["stale"]),
    "ack-revoke": lambda lease: services.ack(lease, Outcome.REVOKE),
    "result": lambda lease: services.ack(lease, Outcome.SUCCESS, result={"by": "stale"}),
    "checkpoint": lambda lease: services.checkpoint(lease, {"step": "stale"}),
    "output": lambda lease: services.write_output(lease, {"by": "stale"}),
    "progress": lambda lease: services.write_progress(lease, 9, 10, "stale"),
    "release": lambda lease: services.release(lease),
}


def _reclaimed_and_readmitted(store_clock) -> tuple[LeaseRef, LeaseRef]:
    """w1's lease expires and is reclaimed; w2 holds the job now. Returns (stale, current)."""
    first = start_job()
    store_clock.advance(LEASE_MS)
    services.reclaim_expired(10)
    second = services.admit("w2", ["walk"], 1)[0]
    return first.lease, second.lease


@pytest.mark.parametrize("write", WRITES, ids=str)
def test_a_stale_fence_is_rejected_and_writes_nothing(store_clock, write):
    stale, current = _reclaimed_and_readmitted(store_clock)
    services.write_output(current, {"by": "current"})
    services.checkpoint(current, {"step": "current"})
    before = snapshot(stale.job_id)
    with pytest.raises(LeaseRejected, match="stale"):
        WRITES[write](stale)
    assert snapshot(stale.job_id) == before
    assert services.get_output(stale.job_id).data == {"by": "current"}
    assert services.renew([current], LEASE_MS) == []


@pytest.mark.parametrize("write", WRITES, ids=str)
def test_a_job_that_is_not_running_rejects_its_own_fence(store_clock, write):
    driven = start_job()
    services.cancel(driven.job_id)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected, match="cancelled"):
        WRITES[write](driven.lease)
    assert snapshot(driven.job_id) == before


@pytest.mark.parametrize("write", WRITES, ids=str)
def test_an_expired_lease_is_rejected_before_any_reclaim(store_clock, write):
    driven = start_job()
    store_clock.advance(LEASE_MS)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected, match="expired"):
        WRITES[write](driven.lease)
    assert snapshot(driven.job_id) == before
    assert job_row(driven.job_id)["state"] == "running"


@pytest.mark.parametrize("write", WRITES, ids=str)
def test_a_lease_one_ms_before_expiry_still_writes(store_clock, write):
    driven = start_job()
    store_clock.advance(LEASE_MS - 1)
    WRITES[write](driven.lease)


@pytest.mark.parametrize("write", WRITES, ids=str)
def test_a_deleted_job_rejects_every_write(store_clock, write):
    driven = start_job()
    services.ack(driven.lease, Outcome.REVOKE)
    with pytest.raises(LeaseRejected):
        WRITES[write](driven.lease)
    assert job_row(driven.job_id) is None


def test_a_stale_worker_cannot_overwrite_the_current_holders_work(store_clock):
    stale, current = _reclaimed_and_readmitted(store_clock)
    services.write_progress(current, 1, 2, "half")
    for write in WRITES.values():
        with pytest.raises(LeaseRejected):
            write(stale)
    assert services.ack(current, Outcome.SUCCESS, result={"by": "current"}) == "completed"
    result = services.get_result(current.job_id)
    assert (result.data, result.fence) == ({"by": "current"}, current.fence)
    assert services.get_progress(current.job_id).message == "half"


def test_fenced_writes_return_store_stamped_attempt_fence_and_time(store_clock):
    driven = start_job()
    store_clock.advance(10)
    output = services.write_output(driven.lease, [1, 2])
    progress = services.write_progress(driven.lease, 3, 4, "three")
    now = store_clock.now()
    assert (output.job_id, output.attempt, output.fence, output.at, output.data) == (driven.job_id, 1, 1, now, [1, 2])
    assert (progress.attempt, progress.fence, progress.at) == (1, 1, now)
    assert (progress.current, progress.total, progress.message) == (3, 4, "three")
    assert services.get_output(driven.job_id) == output
    assert services.get_progress(driven.job_id) == progress


def test_side_data_of_a_later_claim_carries_that_claims_attempt_and_fence(store_clock):
    driven = start_job()
    services.write_output(driven.lease, "first")
    services.ack(driven.lease, Outcome.RETRY, delay_ms=0)
    services.promote_due(10)
    again = services.admit("w2", ["walk"], 1)[0]
    assert (services.get_output(driven.job_id).attempt, services.get_output(driven.job_id).fence) == (1, 1)
    later = services.write_output(again.lease, "second")
    assert (later.attempt, later.fence) == (2, 2)


def test_checkpoint_is_handed_back_at_the_next_admission(store_clock):
    driven = start_job()
    services.checkpoint(driven.lease, {"step": 3})
    services.release(driven.lease)
    unit = services.admit("w2", ["walk"], 1)[0]
    assert unit.checkpoint == {"step": 3}


# --- renew ---------------------------------------------------------------------------


def test_renew_extends_a_held_lease_on_the_store_clock(store_clock):
    driven = start_job()
    store_clock.advance(LEASE_MS - 1)
    assert services.renew([driven.lease], 5_000) == []
    assert job_row(driven.job_id)["lease_expires_at"] == store_clock.now() + timedelta(milliseconds=5_000)
    store_clock.advance(4_999)
    assert services.reclaim_expired(10) == []
    assert services.ack(driven.lease, Outcome.SUCCESS) == "completed"


def _lost_by(how: str, store_clock) -> LeaseRef:
    driven = start_job()
    if how == "expired":
        store_clock.advance(LEASE_MS)
    elif how == "reclaimed":
        store_clock.advance(LEASE_MS)
        services.reclaim_expired(10)
    elif how == "re-claimed":
        store_clock.advance(LEASE_MS)
        services.reclaim_expired(10)
        services.admit("w2", ["walk"], 1)
    elif how == "cancelled":
        services.cancel(driven.job_id)
    elif how == "finished":
        services.ack(driven.lease, Outcome.SUCCESS)
    elif how == "deleted":
        services.ack(driven.lease, Outcome.REVOKE)
    elif how == "released":
        services.release(driven.lease)
    return driven.lease


@pytest.mark.parametrize("how", ["expired", "reclaimed", "re-claimed", "cancelled", "finished", "deleted", "released"])
def test_renew_reports_a_lost_lease_without_raising_or_reviving_it(store_clock, how):
    lost = _lost_by(how, store_clock)
    before = snapshot(lost.job_id)
    assert services.renew([lost], 60_000) == [lost.job_id]
    assert snapshot(lost.job_id) == before


def test_renew_reports_only_the_lost_ones_of_a_batch(store_clock):
    held = start_job(queue="a")
    lost = start_job(queue="b")
    services.cancel(lost.job_id)
    assert services.renew([held.lease, lost.lease], 5_000) == [lost.job_id]
    assert job_row(held.job_id)["lease_expires_at"] == store_clock.now() + timedelta(milliseconds=5_000)


# --- graceful release ----------------------------------------------------------------


def test_release_hands_the_job_back_as_available_with_a_record(store_clock):
    driven = start_job()
    services.release(driven.lease)
    row = job_row(driven.job_id)
    assert row["state"] == "available"
    assert (row["attempt"], row["crash_attempt"], row["fence"]) == (0, 0, 1)
    assert row["lease_holder"] is None and row["lease_expires_at"] is None
    (record,) = services.errors(driven.job_id)
    assert (record.outcome, record.attempt, record.fence) == ("released", 1, 1)
    unit = services.admit("w2", ["walk"], 1)[0]
    assert (unit.lease.fence, unit.attempt, unit.crash_attempt) == (2, 0, 0)


def test_release_does_not_release_an_available_job(store_clock):
    driven = start_job()
    services.release(driven.lease)
    before = snapshot(driven.job_id)
    with pytest.raises(LeaseRejected):
        services.release(driven.lease)
    assert snapshot(driven.job_id) == before
    assert recorded(driven.job_id) == ["released"]


def test_admit_opens_a_run_and_sets_a_lease(store_clock):
    driven = start_job()
    row = job_row(driven.job_id)
    assert (row["state"], row["fence"], row["lease_holder"]) == ("running", 1, "w1")
    assert row["lease_expires_at"] == store_clock.now() + timedelta(milliseconds=LEASE_MS)
    (run,) = run_rows(driven.job_id)
    assert (run["attempt"], run["fence"], run["worker_id"], run["finished_at"]) == (1, 1, "w1", None)
    assert services.errors(driven.job_id) == []
    assert state_of(driven.job_id) == "running"


def test_a_worker_holding_more_leases_than_sqlite_binds_renews_them_all(store_clock):
    """Renewal listed every held lease by job and fence in one statement: 500 leases bound
    1,002 parameters, past the 999 of SQLite before 3.32, and every renewal failed."""
    services.enqueue([envelope(NOOP, queue="held", lease_ms=LEASE_MS) for _ in range(500)])
    held = [unit.lease for unit in services.admit("w1", ["held"], 500)]
    stale = LeaseRef(held[0].job_id, held[0].fence + 1)  # a fence never claimed: lost
    store_clock.advance(LEASE_MS - 1)
    with sqlite_binding_at_most():
        lost = services.renew([*held, stale], LEASE_MS)
    assert lost == [stale.job_id]
    store_clock.advance(LEASE_MS - 1)
    assert services.reclaim_expired(1_000) == [], "every lease was extended"
