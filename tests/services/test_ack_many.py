"""``services.ack_many``: many acks in one transaction, each fenced and applied on its own.

A stale, expired, repeated or malformed ack in a batch is refused in its reply and
changes nothing, while the other acks of the batch apply exactly as ``ack`` would.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from boson_django import services
from boson_django.errors import InvalidEnvelope, LeaseRejected
from boson_django.models import ThroughputMinute
from boson_django.services import AckRequest, LeaseRef, Outcome
from tests.factories import EPHEMERAL, NOOP, envelope, state_of
from tests.services.support import (
    LEASE_MS, RETENTION_MS, job_row, recorded, run_rows, snapshot, sqlite_binding_at_most, start_job,
)


def _completed_count() -> int:
    return sum(ThroughputMinute.objects.filter(outcome="completed").values_list("count", flat=True))


def _stale_and_current(store_clock) -> tuple[LeaseRef, LeaseRef]:
    first = start_job()
    store_clock.advance(LEASE_MS)
    services.reclaim_expired(10)
    second = services.admit("w2", ["walk"], 1)[0]
    return first.lease, second.lease


def test_a_stale_lease_in_a_batch_is_rejected_while_the_others_apply(store_clock):
    stale, current = _stale_and_current(store_clock)
    a, b = start_job(), start_job()
    held_by_w2 = snapshot(current.job_id)
    replies = services.ack_many([
        AckRequest(a.lease, Outcome.SUCCESS),
        AckRequest(stale, Outcome.SUCCESS, result={"by": "stale"}),
        AckRequest(b.lease, Outcome.SUCCESS, result={"n": 2}),
    ])
    assert [r.ok for r in replies] == [True, False, True]
    assert isinstance(replies[1].error, LeaseRejected) and "stale" in str(replies[1].error)
    assert snapshot(current.job_id) == held_by_w2
    assert state_of(a.job_id) == state_of(b.job_id) == "completed"
    assert services.get_result(b.job_id).data == {"n": 2}
    assert services.get_result(a.job_id) is None


def test_batched_success_writes_what_ack_writes(store_clock):
    one, many = start_job(), start_job()
    before = _completed_count()
    services.ack(one.lease, Outcome.SUCCESS, result=[1, "x"])
    (reply,) = services.ack_many([AckRequest(many.lease, Outcome.SUCCESS, result=[1, "x"])])
    assert reply.state == "completed" and reply.at == store_clock.now()
    skip = {"id", "fingerprint"}
    row_one, row_many = job_row(one.job_id), job_row(many.job_id)
    assert {k: v for k, v in row_one.items() if k not in skip} == {k: v for k, v in row_many.items() if k not in skip}
    assert row_many["attempt"] == 1 and row_many["lease_holder"] is None
    assert row_many["expires_at"] == store_clock.now() + timedelta(milliseconds=RETENTION_MS)
    strip = lambda runs: [{k: v for k, v in r.items() if k not in ("id", "job_id")} for r in runs]  # noqa: E731
    assert strip(run_rows(one.job_id)) == strip(run_rows(many.job_id))
    assert services.get_result(one.job_id).data == services.get_result(many.job_id).data == [1, "x"]
    assert recorded(many.job_id) == []
    assert _completed_count() == before + 2


def test_every_outcome_in_one_batch_matches_single_acks(store_clock):
    jobs = [start_job() for _ in range(5)]
    replies = services.ack_many([
        AckRequest(jobs[0].lease, Outcome.RETRY, error="boom", logs=["line"]),
        AckRequest(jobs[1].lease, Outcome.SNOOZE, delay_ms=5_000),
        AckRequest(jobs[2].lease, Outcome.SKIP),
        AckRequest(jobs[3].lease, Outcome.SUCCESS, logs=["said something"]),
        AckRequest(jobs[4].lease, Outcome.REVOKE),
    ])
    assert [r.state for r in replies] == ["retryable", "scheduled", "skipped", "completed", None]
    assert all(r.ok for r in replies)
    assert recorded(jobs[0].job_id) == ["retry"] and services.errors(jobs[0].job_id)[0].logs == ["line"]
    assert recorded(jobs[1].job_id) == []
    assert recorded(jobs[3].job_id) == ["success"]
    assert job_row(jobs[4].job_id) is None


def test_expired_missing_and_repeated_leases_are_refused_one_by_one(store_clock):
    late = start_job(lease_ms=100)
    fine = start_job()
    store_clock.advance(100)
    before = snapshot(late.job_id)
    replies = services.ack_many([
        AckRequest(late.lease, Outcome.SUCCESS),
        AckRequest(LeaseRef("no-such-job", 1), Outcome.SUCCESS),
        AckRequest(fine.lease, Outcome.SUCCESS),
        AckRequest(fine.lease, Outcome.RETRY, error="second ack of the same lease"),
    ])
    assert [type(r.error) for r in replies] == [LeaseRejected, LeaseRejected, type(None), LeaseRejected]
    assert "expired" in str(replies[0].error) and "no longer exists" in str(replies[1].error)
    assert snapshot(late.job_id) == before
    assert state_of(fine.job_id) == "completed" and recorded(fine.job_id) == []


def test_a_malformed_ack_is_refused_and_writes_nothing(store_clock):
    bad, good = start_job(), start_job()
    before = snapshot(bad.job_id)
    replies = services.ack_many([
        AckRequest(bad.lease, Outcome.SNOOZE),  # snooze needs delay_ms > 0
        AckRequest(good.lease, "success"),
        AckRequest(bad.lease, Outcome.LEASE_LOST),
    ])
    assert isinstance(replies[0].error, InvalidEnvelope) and isinstance(replies[2].error, InvalidEnvelope)
    assert replies[1].state == "completed"
    assert snapshot(bad.job_id) == before


def test_an_all_rejected_batch_changes_nothing(store_clock):
    stale, current = _stale_and_current(store_clock)
    before = snapshot(current.job_id)
    counted = _completed_count()
    (reply,) = services.ack_many([AckRequest(stale, Outcome.SUCCESS)])
    assert isinstance(reply.error, LeaseRejected)
    assert snapshot(current.job_id) == before and _completed_count() == counted


def test_retention_zero_deletes_at_the_batched_ack_and_still_counts(store_clock):
    gone, kept = start_job(task=EPHEMERAL, retention_ms=0), start_job()
    counted = _completed_count()
    replies = services.ack_many([AckRequest(gone.lease, Outcome.SUCCESS), AckRequest(kept.lease, Outcome.SUCCESS)])
    assert [r.state for r in replies] == [None, "completed"]
    assert job_row(gone.job_id) is None and run_rows(gone.job_id) == []
    assert _completed_count() == counted + 2


def test_empty_batch(db):
    assert services.ack_many([]) == []


@pytest.mark.postgres
def test_batched_ack_waits_for_a_concurrent_holder_of_the_row_lock(live_clock):
    """A reclaim holding the row lock commits first; the ack then sees the moved fence."""
    import threading

    from django.db import connections, transaction

    job = start_job()
    other = start_job()
    live_clock.advance(LEASE_MS)
    locked, release = threading.Event(), threading.Event()

    def reclaim_holding_lock() -> None:
        with transaction.atomic():
            services.reclaim_expired(10)
            locked.set()
            release.wait(5)
        connections.close_all()

    thread = threading.Thread(target=reclaim_holding_lock)
    thread.start()
    locked.wait(5)
    threading.Timer(0.2, release.set).start()
    replies = services.ack_many([AckRequest(job.lease, Outcome.SUCCESS), AckRequest(other.lease, Outcome.SUCCESS)])
    thread.join()
    assert all(isinstance(r.error, LeaseRejected) for r in replies)
    assert state_of(job.job_id) == state_of(other.job_id) == "available"


def test_batches_larger_than_sqlite_binds_are_admitted_and_acked(store_clock):
    """A claim listed every job it took in one statement (five parameters a job), its
    runs in another (eight), and a flush every result in one more (five): where SQLite
    binds 999 (before 3.32) a claim of 200 jobs failed, so a worker with that many free
    slots never started a job, and a flush of 200 results failed every time, so those
    jobs ran again once their leases lapsed. Fewer are claimed at once there; a flush
    still commits whole."""
    many = 300
    services.enqueue([envelope(NOOP, queue="bound", lease_ms=LEASE_MS) for _ in range(many)])
    units: list = []
    with sqlite_binding_at_most():
        while claimed := services.admit("w1", ["bound"], many - len(units)):
            units += claimed
        replies = services.ack_many([AckRequest(u.lease, Outcome.SUCCESS, result=i) for i, u in enumerate(units)])
    assert len(units) == many
    assert [r.state for r in replies] == ["completed"] * many
    assert [services.get_result(u.lease.job_id).data for u in units] == list(range(many))
    assert services.find_problems() == []
