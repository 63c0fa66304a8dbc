"""Acks, on the lane's engine: the driver's statements, and every outcome through
``ack_many`` (the decision is the services', the writing the driver's)."""

from __future__ import annotations

import pytest

from boson_django import conf, database, services
from boson_django.errors import InvalidEnvelope, LeaseRejected
from boson_django.models import JobData
from boson_django.services import AckRequest, Outcome, decide
from boson_django.states import IllegalTransition
from tests.drivers.conftest import expire, later, open_runs, row


def _plain(driver, conn, lease, *, result=None):
    if not driver.completes_plain:
        pytest.skip(f"{driver!r} writes plain successes through the general path")
    out = driver.complete_plain(conn, [(lease.job_id, lease.fence, result)], conf.get().RETENTION_MS, 0, details=True)
    assert out is not None
    return out[0]


# -- the plain-success batch (engines that write it as one statement) -------------------

def test_the_plain_batch_completes_a_running_job(driver, conn, running, store_clock):
    lease = running()
    done = _plain(driver, conn, lease, result=database.to_json({"n": 1}))
    assert list(done) == [lease.job_id]
    job = row(lease.job_id)
    assert (job["state"], job["attempt"], job["lease_holder"]) == ("completed", 1, None)
    assert job["expires_at"] == store_clock.now() + later(conf.get().RETENTION_MS)
    assert open_runs(lease.job_id) == 0
    assert JobData.objects.get(job_id=lease.job_id, kind="result").data == {"n": 1}


def test_the_plain_batch_does_not_complete_a_job_whose_fence_moved(driver, conn, running):
    lease = running()
    assert _plain(driver, conn, lease._replace(fence=lease.fence + 1)) == {}
    assert row(lease.job_id)["state"] == "running"


def test_the_plain_batch_does_not_complete_an_expired_lease(driver, conn, running, store_clock):
    lease = running()
    expire(store_clock)
    assert _plain(driver, conn, lease) == {}
    assert row(lease.job_id)["state"] == "running"


def test_the_plain_batch_does_not_complete_a_cancelled_job(driver, conn, running):
    lease = running()
    services.cancel(lease.job_id)
    assert _plain(driver, conn, lease) == {}
    assert row(lease.job_id)["state"] == "cancelled"


# -- the shared statements -----------------------------------------------------------

def test_lock_acked_reads_the_rows_in_id_order(driver, conn, running):
    leases = [running() for _ in range(3)]
    rows = driver.lock_acked(conn, [lease.job_id for lease in reversed(leases)])
    assert [r[0] for r in rows] == sorted(lease.job_id for lease in leases)


def test_complete_locked_completes_a_running_job(driver, conn, running, store_clock):
    lease = running()
    until = store_clock.now() + later(5_000)
    assert driver.complete_locked(conn, [(lease.job_id, lease.fence, until)], store_clock.now()) == 1
    job = row(lease.job_id)
    assert (job["state"], job["attempt"], job["expires_at"]) == ("completed", 1, until)
    assert open_runs(lease.job_id) == 0


def test_complete_locked_does_not_complete_a_cancelled_job(driver, conn, running, store_clock):
    lease = running()
    services.cancel(lease.job_id)
    assert driver.complete_locked(conn, [(lease.job_id, lease.fence, store_clock.now())], store_clock.now()) == 0
    assert row(lease.job_id)["state"] == "cancelled"


def test_put_results_keeps_the_latest(driver, conn, running, store_clock):
    lease = running()
    driver.put_results(conn, [(lease.job_id, 1, lease.fence, {"v": 1})], store_clock.now())
    driver.put_results(conn, [(lease.job_id, 1, lease.fence, {"v": 2})], store_clock.now())
    assert JobData.objects.get(job_id=lease.job_id, kind="result").data == {"v": 2}


def test_delete_jobs_deletes_the_jobs_with_their_runs_and_not_others(driver, conn, running):
    gone, kept = running(), running()
    assert driver.delete_jobs(conn, [gone.job_id]) == 1
    assert row(gone.job_id) is None and open_runs(gone.job_id) == 0
    assert row(kept.job_id)["state"] == "running"


# -- every outcome, through ack_many on this engine ------------------------------------

def _ack(lease, outcome, **kwargs):
    (reply,) = services.ack_many([AckRequest(lease, outcome, **kwargs)])
    return reply


@pytest.mark.parametrize("plain", [True, False], ids=["plain", "with-logs"])
def test_an_ack_completes_a_running_job(running, plain):
    lease = running()
    reply = _ack(lease, Outcome.SUCCESS, logs=() if plain else ("done",))
    assert (reply.ok, reply.state, row(lease.job_id)["state"]) == (True, "completed", "completed")


@pytest.mark.parametrize("how", ["fence moved", "expired", "cancelled", "acked already"])
def test_an_ack_does_not_complete_a_job_whose_lease_no_longer_holds(running, store_clock, how):
    lease = running()
    if how == "fence moved":
        lease = lease._replace(fence=lease.fence + 1)
    elif how == "expired":
        expire(store_clock)
    elif how == "cancelled":
        services.cancel(lease.job_id)
    else:
        services.ack(lease, Outcome.SUCCESS)
    before = row(lease.job_id)
    assert isinstance(_ack(lease, Outcome.SUCCESS).error, LeaseRejected)
    assert row(lease.job_id) == before


def test_a_retry_makes_the_job_retryable_after_its_delay(running, store_clock):
    lease = running()
    assert _ack(lease, Outcome.RETRY, error="boom", delay_ms=2_000).state == "retryable"
    job = row(lease.job_id)
    assert (job["attempt"], job["run_at"], job["last_error"]) == (1, store_clock.now() + later(2_000), "boom")


def test_a_retry_does_not_retry_past_max_attempts(running):
    lease = running(max_attempts=1)
    assert _ack(lease, Outcome.RETRY, error="boom").state == "failed"
    assert row(lease.job_id)["finalized_at"] is not None


def test_a_snooze_schedules_the_job_without_spending_an_attempt(running, store_clock):
    lease = running()
    assert _ack(lease, Outcome.SNOOZE, delay_ms=3_000).state == "scheduled"
    job = row(lease.job_id)
    assert (job["attempt"], job["run_at"], job["finalized_at"]) == (0, store_clock.now() + later(3_000), None)


def test_a_rate_limited_ack_schedules_the_job_after_its_delay(running, store_clock):
    lease = running()
    assert _ack(lease, Outcome.RATE_LIMITED, delay_ms=1_500).state == "scheduled"
    assert (row(lease.job_id)["attempt"], row(lease.job_id)["run_at"]) == (0, store_clock.now() + later(1_500))


@pytest.mark.parametrize(("outcome", "state"), [
    (Outcome.SKIP, "skipped"), (Outcome.DISCARD, "failed"), (Outcome.UNDECODABLE, "failed"),
])
def test_a_final_outcome_finishes_the_job(running, store_clock, outcome, state):
    lease = running()
    assert _ack(lease, outcome).state == state
    job = row(lease.job_id)
    assert (job["state"], job["attempt"], job["finalized_at"]) == (state, 1, store_clock.now())


def test_a_revoke_deletes_the_job(running):
    lease = running()
    reply = _ack(lease, Outcome.REVOKE)
    assert (reply.ok, reply.state, row(lease.job_id)) == (True, None, None)


def test_a_success_at_retention_zero_deletes_the_job(running):
    lease = running(retention_ms=0)
    assert _ack(lease, Outcome.SUCCESS).state is None
    assert row(lease.job_id) is None


def test_ack_raises_what_ack_many_replies(running):
    lease = running()
    with pytest.raises(InvalidEnvelope):
        services.ack(lease, "no such outcome")
    with pytest.raises(LeaseRejected):
        services.ack(lease._replace(fence=lease.fence + 1), Outcome.SUCCESS)
    assert services.ack(lease, Outcome.SUCCESS) == "completed"


def test_the_decision_refuses_an_outcome_the_table_does_not_allow(running, store_clock):
    lease = running()
    with pytest.raises(IllegalTransition):
        decide.decide(Outcome.LEASE_LOST, _job(lease.job_id), store_clock.now())


def _job(job_id):
    from boson_django.models import Job

    return Job.objects.get(id=job_id)
