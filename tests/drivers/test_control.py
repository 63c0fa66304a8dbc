"""Operator controls, on the lane's engine: the guarded write, cancel, retry, release."""

from __future__ import annotations

from boson_django import services
from boson_django.errors import LeaseRejected
from boson_django.services import Outcome
from boson_django.states import Event
from tests.drivers.conftest import expire, row


def test_write_jobs_writes_a_job_the_event_may_move(driver, conn, running):
    lease = running()
    assert driver.write_jobs(conn, Event.CANCEL, {"state": "cancelled", "lease_holder": None}, [lease.job_id]) == 1
    assert (row(lease.job_id)["state"], row(lease.job_id)["lease_holder"]) == ("cancelled", None)


def test_write_jobs_does_not_write_a_job_the_event_may_not_move(driver, conn, running):
    lease = running()
    services.ack(lease, Outcome.SUCCESS)
    assert driver.write_jobs(conn, Event.CANCEL, {"state": "cancelled"}, [lease.job_id]) == 0
    assert driver.write_jobs(conn, Event.RELEASE_QUARANTINE, {"state": "available"}, [lease.job_id]) == 0
    assert row(lease.job_id)["state"] == "completed"


def test_cancel_cancels_a_running_job_and_revokes_its_lease(running):
    lease = running()
    assert services.cancel(lease.job_id) is True
    assert row(lease.job_id)["state"] == "cancelled"
    try:
        services.ack(lease, Outcome.SUCCESS)
    except LeaseRejected:
        pass
    else:
        raise AssertionError("an ack under a cancelled lease was accepted")


def test_cancel_does_not_cancel_a_finished_job(running):
    lease = running()
    services.ack(lease, Outcome.SUCCESS)
    assert services.cancel(lease.job_id) is False
    assert row(lease.job_id)["state"] == "completed"


def test_retry_makes_a_failed_job_available(running, store_clock):
    lease = running()
    services.ack(lease, Outcome.DISCARD)
    assert services.retry(lease.job_id) is True
    job = row(lease.job_id)
    assert (job["state"], job["run_at"], job["finalized_at"], job["max_attempts"] >= 2) == (
        "available", store_clock.now(), None, True)


def test_retry_does_not_retry_a_running_job(running):
    lease = running()
    assert services.retry(lease.job_id) is False
    assert row(lease.job_id)["state"] == "running"


def test_release_from_quarantine_does_not_release_a_job_that_is_not_quarantined(running):
    lease = running()
    assert services.release_quarantined(lease.job_id) is False
    assert row(lease.job_id)["state"] == "running"


def test_release_from_quarantine_makes_a_quarantined_job_available(running, store_clock):
    from tests.factories import NOOP

    services.set_task_config(NOOP, crash_limit=1)
    lease = running()
    expire(store_clock)
    (reclaimed,) = services.reclaim_expired()
    assert reclaimed.state == "quarantined"
    assert services.release_quarantined(lease.job_id) is True
    job = row(lease.job_id)
    assert (job["state"], job["crash_attempt"], job["run_at"]) == ("available", 0, store_clock.now())
