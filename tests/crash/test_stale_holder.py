"""A worker whose lease expired and was re-admitted elsewhere can never write again."""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.errors import LeaseRejected
from boson_django.models import Job, JobData, Run
from boson_django.services import Outcome
from tests.factories import NOOP, enqueue_one

LEASE_MS = 1_000


def _job_snapshot(job_id: str) -> dict:
    row = Job.objects.filter(id=job_id).values().get()
    runs = list(Run.objects.filter(job_id=job_id).order_by("id").values())
    data = list(JobData.objects.filter(job_id=job_id).order_by("id").values())
    return {"job": row, "runs": runs, "data": data}


@pytest.fixture
def stale_and_current(store_clock):
    """(stale unit of w-old, current unit of w-new) after expiry, reclaim and re-admission."""
    job_id = enqueue_one(NOOP, queue="stale")
    (old,) = services.admit("w-old", ["stale"], 1, lease_ms=LEASE_MS)
    store_clock.advance(LEASE_MS + 1)
    (reclaimed,) = services.reclaim_expired()
    assert (reclaimed.job_id, reclaimed.state, reclaimed.crash_attempt) == (job_id, "available", 1)
    (new,) = services.admit("w-new", ["stale"], 1, lease_ms=30_000)
    assert new.lease == (job_id, old.lease.fence + 1)
    assert new.crash_attempt == 1 and new.attempt == 0
    return old, new


STALE_WRITES = {
    "ack SUCCESS": lambda lease: services.ack(lease, Outcome.SUCCESS),
    "ack SUCCESS with result": lambda lease: services.ack(lease, Outcome.SUCCESS, result={"stale": True}),
    "ack RETRY": lambda lease: services.ack(lease, Outcome.RETRY, error="stale", logs=["stale log"]),
    "ack SNOOZE": lambda lease: services.ack(lease, Outcome.SNOOZE, delay_ms=5_000),
    "ack REVOKE": lambda lease: services.ack(lease, Outcome.REVOKE),
    "ack with actual_weight": lambda lease: services.ack(lease, Outcome.SUCCESS, actual_weight=0),
    "checkpoint": lambda lease: services.checkpoint(lease, {"step": 99}),
    "write_output": lambda lease: services.write_output(lease, {"out": "stale"}),
    "write_progress": lambda lease: services.write_progress(lease, 5, 10, "stale"),
    "release": lambda lease: services.release(lease),
}


@pytest.mark.parametrize("write", list(STALE_WRITES), ids=list(STALE_WRITES))
def test_a_stale_holder_is_rejected_and_writes_nothing(stale_and_current, write):
    old, new = stale_and_current
    services.checkpoint(new.lease, {"step": 1})
    services.write_output(new.lease, {"out": "current"})
    services.write_progress(new.lease, 1, 10, "current")
    before = _job_snapshot(new.lease.job_id)

    with pytest.raises(LeaseRejected, match="stale"):
        STALE_WRITES[write](old.lease)

    assert _job_snapshot(new.lease.job_id) == before
    assert services.get_output(new.lease.job_id).data == {"out": "current"}
    assert services.get_output(new.lease.job_id).fence == new.lease.fence
    assert services.get_progress(new.lease.job_id).message == "current"
    assert services.get_result(new.lease.job_id) is None


def test_a_stale_holder_stores_nothing_before_the_current_holder_writes(stale_and_current):
    old, new = stale_and_current
    for write in STALE_WRITES.values():
        with pytest.raises(LeaseRejected):
            write(old.lease)
    job_id = new.lease.job_id
    assert services.get_output(job_id) is None
    assert services.get_progress(job_id) is None
    assert services.get_result(job_id) is None
    assert Job.objects.get(id=job_id).checkpoint is None
    assert services.job_state(job_id)[1] == "running"
    assert Job.objects.get(id=job_id).lease_holder == "w-new"


def test_renew_reports_the_stale_lease_lost_and_keeps_the_current(stale_and_current, store_clock):
    old, new = stale_and_current
    expires = Job.objects.get(id=new.lease.job_id).lease_expires_at

    assert services.renew([old.lease], 30_000) == [old.lease.job_id]
    assert Job.objects.get(id=new.lease.job_id).lease_expires_at == expires, "a stale renew extended the lease"
    assert services.renew([new.lease, old.lease], 60_000) == [old.lease.job_id]
    assert Job.objects.get(id=new.lease.job_id).lease_expires_at > expires


def test_the_current_holder_finishes_and_the_history_is_honest(stale_and_current):
    old, new = stale_and_current
    with pytest.raises(LeaseRejected):
        services.ack(old.lease, Outcome.SUCCESS, result="stale")
    assert services.ack(new.lease, Outcome.SUCCESS, result="current") == "completed"
    result = services.get_result(new.lease.job_id)
    assert (result.data, result.fence, result.attempt) == ("current", new.lease.fence, 1)
    records = services.errors(new.lease.job_id)
    assert [(r.outcome, r.fence) for r in records] == [("lease_lost", old.lease.fence)]


def test_an_expired_but_not_yet_reclaimed_lease_is_already_refused(store_clock):
    job_id = enqueue_one(NOOP, queue="stale")
    (unit,) = services.admit("w-old", ["stale"], 1, lease_ms=LEASE_MS)
    store_clock.advance(LEASE_MS)  # expiry is exclusive: at lease_expires_at the lease is gone
    before = _job_snapshot(job_id)
    for write in STALE_WRITES.values():
        with pytest.raises(LeaseRejected, match="expired"):
            write(unit.lease)
    assert _job_snapshot(job_id) == before
    assert services.renew([unit.lease], 30_000) == [job_id]
    assert _job_snapshot(job_id) == before
