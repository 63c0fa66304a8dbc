"""SPEC section 2, the reclaim and evict rows and the crash rules: an expired lease costs
``crash_attempt`` (never ``attempt``), a poison pill parks in ``quarantined`` at the crash
limit, quarantined jobs never expire, finished jobs go at ``finalized_at + retention``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from boson_django import services
from boson_django.models import QuarantinedFingerprint
from boson_django.services import Outcome
from tests.conftest import EPOCH
from tests.factories import NOOP, envelope, state_of
from tests.services.support import (
    LEASE_MS, drive, job_row, recorded, run_rows, snapshot, sqlite_binding_at_most, start_job,
)


def _crash_and_reclaim(store_clock, job_id: str) -> list[services.Reclaimed]:
    """The holder stops renewing; the reclaimer finds the expired lease."""
    store_clock.advance(job_row(job_id)["lease_ms"])
    return services.reclaim_expired(100)


# --- reclaim -------------------------------------------------------------------------


def test_reclaim_makes_an_expired_job_available_and_counts_a_crash(store_clock):
    driven = start_job()
    store_clock.advance(LEASE_MS)
    (reclaimed,) = services.reclaim_expired(10)
    assert (reclaimed.job_id, reclaimed.fence, reclaimed.state, reclaimed.crash_attempt) == (
        driven.job_id, 1, "available", 1,
    )
    row = job_row(driven.job_id)
    assert row["state"] == "available"
    assert (row["attempt"], row["crash_attempt"], row["fence"]) == (0, 1, 1)
    assert row["lease_holder"] is None and row["lease_expires_at"] is None
    (record,) = services.errors(driven.job_id)
    assert (record.outcome, record.attempt, record.fence, record.at) == ("lease_lost", 1, 1, store_clock.now())
    assert record.error


def test_reclaim_does_not_touch_a_lease_one_ms_from_expiry(store_clock):
    driven = start_job()
    store_clock.advance(LEASE_MS - 1)
    before = snapshot(driven.job_id)
    assert services.reclaim_expired(10) == []
    assert snapshot(driven.job_id) == before


def test_a_crash_does_not_burn_a_retry(store_clock):
    driven = start_job(max_attempts=1)
    for crashes in (1, 2):
        _crash_and_reclaim(store_clock, driven.job_id)
        assert (job_row(driven.job_id)["attempt"], job_row(driven.job_id)["crash_attempt"]) == (0, crashes)
        unit = services.admit("w1", ["walk"], 1)[0]
        assert (unit.attempt, unit.crash_attempt) == (0, crashes)
    assert services.ack(unit.lease, Outcome.SUCCESS) == "completed"


def test_a_poison_pill_parks_in_quarantine_at_the_crash_limit(store_clock):
    services.set_task_config(NOOP, crash_limit=3)
    driven = start_job()
    for crashes in (1, 2):
        (reclaimed,) = _crash_and_reclaim(store_clock, driven.job_id)
        assert (reclaimed.state, reclaimed.crash_attempt) == ("available", crashes)
        services.admit("w1", ["walk"], 1)
    (reclaimed,) = _crash_and_reclaim(store_clock, driven.job_id)
    assert (reclaimed.state, reclaimed.crash_attempt) == ("quarantined", 3)
    row = job_row(driven.job_id)
    assert (row["state"], row["attempt"], row["crash_attempt"], row["fence"]) == ("quarantined", 0, 3, 3)
    assert recorded(driven.job_id) == ["lease_lost"] * 3
    parked = QuarantinedFingerprint.objects.get(fingerprint=row["fingerprint"])
    assert parked.job_id == driven.job_id
    assert services.admit("w1", ["walk"], 10) == []


def test_the_crash_limit_comes_from_settings_by_default(store_clock, settings):
    settings.BOSON = {**settings.BOSON, "CRASH_LIMIT": 2}
    driven = start_job()
    assert _crash_and_reclaim(store_clock, driven.job_id)[0].state == "available"
    services.admit("w1", ["walk"], 1)
    assert _crash_and_reclaim(store_clock, driven.job_id)[0].state == "quarantined"


def test_reclaim_is_bounded_by_limit(store_clock):
    jobs = [start_job(queue=f"q{i}") for i in range(3)]
    store_clock.advance(LEASE_MS)
    assert len(services.reclaim_expired(2)) == 2
    assert len(services.reclaim_expired(10)) == 1
    assert {state_of(j.job_id) for j in jobs} == {"available"}


def test_quarantined_jobs_never_expire(store_clock):
    driven = drive("quarantined", store_clock)
    row = job_row(driven.job_id)
    assert row["finalized_at"] is None
    store_clock.advance(365 * 86_400_000)
    assert services.evict_retained(100) == 0
    assert state_of(driven.job_id) == "quarantined"


def test_a_cancelled_job_is_not_reclaimed_when_its_holder_dies(store_clock):
    driven = start_job()
    services.cancel(driven.job_id)
    store_clock.advance(LEASE_MS)
    before = snapshot(driven.job_id)
    assert services.reclaim_expired(10) == []
    assert snapshot(driven.job_id) == before
    assert state_of(driven.job_id) == "cancelled"
    assert recorded(driven.job_id) == ["cancelled"]


# --- evict ---------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["completed", "skipped", "failed", "cancelled"])
def test_evict_deletes_a_finished_job_at_finalized_at_plus_retention(store_clock, state):
    driven = drive(state, store_clock)
    row = job_row(driven.job_id)
    due = row["finalized_at"] + timedelta(milliseconds=row["retention_ms"])
    store_clock.freeze(due - timedelta(milliseconds=1))
    before = snapshot(driven.job_id)
    assert services.evict_retained(100) == 0
    assert snapshot(driven.job_id) == before
    store_clock.advance(1)
    assert services.evict_retained(100) == 1
    assert services.job_state(driven.job_id) is None
    assert run_rows(driven.job_id) == [] and services.errors(driven.job_id) == []


@pytest.mark.parametrize("state", ["scheduled", "available", "running", "retryable", "quarantined"])
def test_evict_never_deletes_an_unfinished_job(store_clock, state):
    driven = drive(state, store_clock)
    store_clock.advance(365 * 86_400_000)
    before = snapshot(driven.job_id)
    assert services.evict_retained(100) == 0
    assert snapshot(driven.job_id) == before


def test_evict_honours_each_jobs_own_retention(store_clock):
    short = start_job(queue="a", retention_ms=1_000)
    long = start_job(queue="b", retention_ms=10_000)
    services.ack(short.lease, Outcome.SUCCESS)
    services.ack(long.lease, Outcome.SUCCESS)
    store_clock.advance(1_000)
    assert services.evict_retained(100) == 1
    assert state_of(short.job_id) is None and state_of(long.job_id) == "completed"
    store_clock.advance(9_000)
    assert services.evict_retained(100) == 1
    assert state_of(long.job_id) is None


def test_evict_removes_side_data_with_the_job(store_clock):
    driven = start_job(retention_ms=5)
    services.write_output(driven.lease, "out")
    services.ack(driven.lease, Outcome.SUCCESS, result="res")
    store_clock.advance(5)
    assert services.evict_retained(10) == 1
    assert services.get_output(driven.job_id) is None and services.get_result(driven.job_id) is None


def test_evict_is_bounded_by_limit(store_clock):
    jobs = [start_job(queue=f"q{i}", retention_ms=1) for i in range(3)]
    for driven in jobs:
        services.ack(driven.lease, Outcome.SKIP)
    store_clock.advance(1)
    assert services.evict_retained(2) == 2
    assert services.evict_retained(10) == 1
    assert services.evict_retained(10) == 0


def test_a_retried_job_is_not_evicted_on_its_old_retention(store_clock):
    driven = drive("failed", store_clock)
    services.retry(driven.job_id)
    store_clock.advance(365 * 86_400_000)
    assert services.evict_retained(10) == 0
    assert state_of(driven.job_id) == "available"


# --- SQLite's limit on parameters per statement ----------------------------------------

#: More jobs due at once than one statement could list where SQLite binds 999 parameters.
MANY = 1_000


def _drain(sweep) -> list[int]:
    """Each call's count until a call finds nothing."""
    counts: list[int] = []
    while (done := sweep(MANY)) and len(counts) < 10:
        counts.append(done if isinstance(done, int) else len(done))
    return counts


def _enqueued(**fields) -> list[str]:
    return [r.id for r in services.enqueue([envelope(NOOP, queue="many", **fields) for _ in range(MANY)])]


def test_a_promotion_larger_than_sqlite_binds_goes_in_batches_it_can(store_clock):
    """With SWEEP_BATCH (1,000) jobs due, every promote failed with "too many SQL
    variables": scheduled jobs stayed scheduled for good."""
    ids = _enqueued(run_at=EPOCH + timedelta(seconds=1))
    store_clock.advance(1_000)
    with sqlite_binding_at_most():
        counts = _drain(services.promote_due)
    assert sum(counts) == MANY and max(counts) < MANY, counts
    assert {state_of(i) for i in ids} == {"available"}


def test_a_reclaim_larger_than_sqlite_binds_goes_in_batches_it_can(store_clock):
    ids = _enqueued(lease_ms=LEASE_MS)
    assert len(services.admit("w1", ["many"], MANY)) == MANY
    store_clock.advance(LEASE_MS)
    with sqlite_binding_at_most():
        counts = _drain(services.reclaim_expired)
    assert sum(counts) == MANY, counts
    assert {state_of(i) for i in ids} == {"available"}
    assert services.find_problems(stranded_after_ms=0) == []


def test_an_eviction_larger_than_sqlite_binds_goes_in_batches_it_can(store_clock):
    ids = _enqueued(retention_ms=1)
    assert len(services.cancel_jobs(ids).done) == MANY
    store_clock.advance(1)
    with sqlite_binding_at_most():
        counts = _drain(services.evict_retained)
    assert sum(counts) == MANY, counts
    assert {state_of(i) for i in ids} == {None}
