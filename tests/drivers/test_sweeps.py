"""Sweeps and leases, on the lane's engine: promote, reclaim, evict, renew, release."""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.services import Outcome
from boson_django.states import Event, JobState
from tests.drivers.conftest import LEASE_MS, expire, later, open_runs, row


def _scheduled(running, ms=1_000):
    lease = running()
    services.ack(lease, Outcome.SNOOZE, delay_ms=ms)
    return lease.job_id


def test_pick_due_picks_the_jobs_whose_time_has_come_and_not_the_others(driver, conn, running, store_clock):
    due, not_yet = _scheduled(running, 1_000), _scheduled(running, 60_000)
    store_clock.advance(1_000)
    picked = driver.pick_due(conn, Event.PROMOTE, "run_at", store_clock.now(), 10, "id")
    assert [r["id"] for r in picked] == [due]
    assert not_yet != due


def test_promote_makes_a_scheduled_job_available(driver, conn, running, store_clock):
    job_id = _scheduled(running)
    assert driver.promote(conn, [job_id]) == 1
    assert row(job_id)["state"] == "available"


def test_promote_does_not_promote_a_running_job(driver, conn, running):
    lease = running()
    assert driver.promote(conn, [lease.job_id]) == 0
    assert row(lease.job_id)["state"] == "running"


def test_reclaim_makes_an_expired_job_available_and_counts_the_crash(driver, conn, running, store_clock):
    lease = running()
    expire(store_clock)
    assert driver.reclaim(conn, [lease.job_id], JobState.AVAILABLE, store_clock.now(), "lost") == 1
    job = row(lease.job_id)
    assert (job["state"], job["crash_attempt"], job["lease_holder"], job["attempt"]) == ("available", 1, None, 0)


def test_reclaim_does_not_reclaim_a_completed_job(driver, conn, running, store_clock):
    lease = running()
    services.ack(lease, Outcome.SUCCESS)
    assert driver.reclaim(conn, [lease.job_id], JobState.AVAILABLE, store_clock.now(), "lost") == 0
    assert row(lease.job_id)["state"] == "completed"


def test_reclaim_does_not_move_a_job_where_the_table_does_not_let_it(driver, conn, running, store_clock):
    lease = running()
    with pytest.raises(ValueError):
        driver.reclaim(conn, [lease.job_id], JobState.COMPLETED, store_clock.now(), "lost")
    assert row(lease.job_id)["state"] == "running"


def test_reclaim_expired_reclaims_an_expired_lease_and_not_a_held_one(running, store_clock):
    expired = running()
    store_clock.advance(LEASE_MS // 2)
    held = running()
    store_clock.advance(LEASE_MS // 2 + 1)
    assert [r.job_id for r in services.reclaim_expired()] == [expired.job_id]
    assert (row(expired.job_id)["state"], row(held.job_id)["state"]) == ("available", "running")
    assert open_runs(expired.job_id) == 0


def test_evict_deletes_a_finished_job_past_its_retention_and_not_a_running_one(running, store_clock):
    done, busy = running(retention_ms=1_000), running()
    services.ack(done, Outcome.SUCCESS)
    store_clock.advance(1_000)
    assert services.evict_retained() == 1
    assert (row(done.job_id), row(busy.job_id)["state"]) == (None, "running")


def test_renew_extends_a_held_lease(driver, conn, running, store_clock):
    lease = running()
    until = store_clock.now() + later(60_000)
    assert driver.renew(conn, [(lease.job_id, lease.fence)], until, store_clock.now()) == {(lease.job_id, lease.fence)}
    assert row(lease.job_id)["lease_expires_at"] == until


@pytest.mark.parametrize("how", ["fence moved", "expired", "completed"])
def test_renew_does_not_extend_a_lease_no_longer_held(driver, conn, running, store_clock, how):
    lease = running()
    if how == "expired":
        expire(store_clock)
    elif how == "completed":
        services.ack(lease, Outcome.SUCCESS)
    fence = lease.fence + 1 if how == "fence moved" else lease.fence
    before = row(lease.job_id)
    assert driver.renew(conn, [(lease.job_id, fence)], store_clock.now() + later(60_000), store_clock.now()) == set()
    assert row(lease.job_id) == before


def test_release_hands_a_held_job_back(driver, conn, running, store_clock):
    lease = running()
    assert driver.release(conn, lease.job_id, lease.fence, store_clock.now()) == 1
    job = row(lease.job_id)
    assert (job["state"], job["lease_holder"], job["attempt"], job["run_at"]) == ("available", None, 0, store_clock.now())


def test_release_does_not_hand_back_a_cancelled_job(driver, conn, running, store_clock):
    lease = running()
    services.cancel(lease.job_id)
    assert driver.release(conn, lease.job_id, lease.fence, store_clock.now()) == 0
    assert row(lease.job_id)["state"] == "cancelled"
