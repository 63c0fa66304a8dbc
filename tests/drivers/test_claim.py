"""The driver's claim statements, the same tests on every engine (``BOSON_TEST_DB``).

Does / does-not pairs: what a claim takes, and what it must leave.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction

from boson_django import drivers
from boson_django.drivers.claim import ClaimStatements
from boson_django.models import Job, Queue
from tests.factories import NOOP, enqueue_one


@pytest.fixture
def driver(store_clock):
    return drivers.for_connection(connection)


def candidates(driver, queues=(), blocked_classes=(), blocked_tasks=(), taken=(), need=10) -> list[str]:
    rows = driver.claim_candidates(connection, list(queues), set(blocked_classes), set(blocked_tasks), list(taken), need)
    return [row["id"] for row in rows]


def claim(driver, store_clock, ids: list[str], *, lease_ms: int | None = None, worker: str = "w1") -> list[dict]:
    rows = driver.claim_candidates(connection, [], set(), set(), [], 100)
    picked = [{**row, "charged": 0.0} for row in rows if row["id"] in ids]
    return driver.claim_picked(connection, picked, worker, store_clock.now(), lease_ms)


def test_claims_an_available_job(driver, store_clock):
    job_id = enqueue_one()
    rows = claim(driver, store_clock, [job_id], lease_ms=30_000)
    assert [row["id"] for row in rows] == [job_id]
    job = Job.objects.get(id=job_id)
    assert (job.state, job.fence, job.lease_holder) == ("running", 1, "w1")
    assert job.lease_expires_at == store_clock.now() + timedelta(seconds=30)
    assert rows[0]["first_run"]


def test_does_not_claim_a_job_that_is_no_longer_available(driver, store_clock):
    job_id = enqueue_one()
    rows = driver.claim_candidates(connection, [], set(), set(), [], 10)
    Job.objects.filter(id=job_id).update(state="cancelled")
    picked = [{**row, "charged": 0.0} for row in rows]
    assert driver.claim_picked(connection, picked, "w1", store_clock.now(), None) == []
    assert Job.objects.get(id=job_id).fence == 0


def test_finds_a_job_of_a_running_queue(driver, store_clock):
    job_id = enqueue_one(queue="open")
    assert candidates(driver, ["open"]) == [job_id]


def test_does_not_find_a_paused_queue_s_job(driver, store_clock):
    enqueue_one(queue="held")
    Queue.objects.filter(name="held").update(paused=True)
    assert candidates(driver) == []
    assert candidates(driver, ["held"]) == []


def test_finds_only_the_named_queues_jobs(driver, store_clock):
    mine = enqueue_one(queue="mine")
    enqueue_one(queue="other")
    assert candidates(driver, ["mine"]) == [mine]


def test_finds_a_scheduled_job_once_its_time_came_and_it_was_promoted(driver, store_clock):
    from boson_django import services

    job_id = enqueue_one(run_at=store_clock.now() + timedelta(seconds=5))
    store_clock.advance(5000)
    services.promote_due(10)
    assert candidates(driver) == [job_id]


def test_does_not_find_a_scheduled_job_before_its_time(driver, store_clock):
    enqueue_one(run_at=store_clock.now() + timedelta(seconds=5))
    assert candidates(driver) == []


def test_finds_jobs_in_claim_order_priority_then_age(driver, store_clock):
    old = enqueue_one()
    store_clock.advance(10)
    new = enqueue_one()
    urgent = enqueue_one(priority=5)
    assert candidates(driver) == [urgent, old, new]
    assert candidates(driver, need=1) == [urgent]


def test_does_not_find_blocked_classes_tasks_or_taken_jobs(driver, store_clock):
    limited = enqueue_one(rate_class="slow")
    taken = enqueue_one()
    plain = enqueue_one(task="tests.testapp.tasks.add", args=[1, 2])
    assert set(candidates(driver)) == {limited, taken, plain}
    assert set(candidates(driver, blocked_classes={"slow"}, taken=[taken])) == {plain}
    assert set(candidates(driver, blocked_tasks={"tests.testapp.tasks.add"})) == {limited, taken}
    assert set(candidates(driver, blocked_tasks={NOOP})) == {plain}


def test_claim_free_takes_jobs_needing_no_bucket_and_counts_the_others(driver, store_clock):
    free_job = enqueue_one()
    limited = enqueue_one(rate_class="slow")
    claimed = driver.claim_free(connection, "w1", [], 10, None)
    if claimed is None:
        assert type(driver).claim_free is ClaimStatements.claim_free  # the general path claims all
        return
    assert [row["id"] for row in claimed.rows] == [free_job]
    assert claimed.held == 1
    assert claimed.now == store_clock.now()
    assert Job.objects.get(id=free_job).state == "running"
    assert Job.objects.get(id=limited).state == "available"
    assert Job.objects.get(id=free_job).runs.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_skips_a_row_another_transaction_holds(live_clock):
    driver = drivers.for_connection(connection)
    held, free = enqueue_one(priority=9), enqueue_one()
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT id FROM boson_job WHERE id = %s FOR UPDATE", [held])
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    other = threading.Thread(target=hold)
    other.start()
    try:
        assert locked.wait(30)
        with transaction.atomic():
            assert candidates(driver) == [free]
            claimed = driver.claim_free(connection, "w1", [], 10, None)
        assert [row["id"] for row in claimed.rows] == [free]
    finally:
        release.set()
        other.join(30)
    assert Job.objects.get(id=held).state == "available"


def test_claim_free_does_not_take_a_paused_queue_s_or_a_scheduled_job(driver, store_clock):
    enqueue_one(queue="held")
    Queue.objects.filter(name="held").update(paused=True)
    enqueue_one(run_at=store_clock.now() + timedelta(seconds=5))
    claimed = driver.claim_free(connection, "w1", [], 10, None)
    if claimed is None:
        pytest.skip(f"{driver!r} claims on the general path only")
    assert (claimed.rows, claimed.held) == ([], 0)
    assert not Job.objects.filter(state="running").exists()
