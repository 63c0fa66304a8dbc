"""The driver's enqueue statements, the same tests on every engine (``BOSON_TEST_DB``).

The preflight is read through :func:`boson_django.services.preflight.preflight`: the
driver's one round trip where it has one, the services' queries otherwise; both must
answer alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction

from boson_django import drivers, ids
from boson_django.drivers.enqueue import COLUMNS
from boson_django.errors import DuplicateJobId
from boson_django.models import Job, QuarantinedFingerprint, Queue, TaskConfig
from boson_django.services.preflight import preflight
from tests.factories import NOOP, enqueue_one


@pytest.fixture
def driver(store_clock):
    return drivers.for_connection(connection)


def row(store_clock, **fields) -> dict:
    values = {
        "id": ids.new_id(), "task": NOOP, "queue": "default", "state": "available", "priority": 0,
        "args": "[]", "kwargs": "{}", "meta": "{}", "unique_key": None, "fingerprint": "f" * 16,
        "weight": 1.0, "rate_class": None, "max_attempts": 3, "retention_ms": 1000, "lease_ms": 1000,
        "timeout_ms": None, "crash_limit": 3, "attempt": 0, "crash_attempt": 0, "fence": 0,
        "charged_weight": 0.0, "last_error": "", "run_at": store_clock.now(), "enqueued_at": store_clock.now(),
    }
    values.update(fields)
    assert set(values) == set(COLUMNS)
    return values


def test_inserts_rows_and_returns_their_ids(driver, store_clock):
    rows = [row(store_clock), row(store_clock, queue="second")]
    assert driver.insert_jobs(connection, rows, {"default", "second"}) == {r["id"] for r in rows}
    assert Job.objects.count() == 2
    assert set(Queue.objects.values_list("name", flat=True)) >= {"default", "second"}


def test_does_not_insert_a_row_whose_unique_key_a_live_job_holds(driver, store_clock):
    holder = enqueue_one(unique_key="k1")
    duplicate = row(store_clock, unique_key="k1")
    assert driver.insert_jobs(connection, [duplicate], set()) == set()
    assert driver.key_holders(connection, {"k1", None}) == {"k1": holder}


def test_inserts_a_row_whose_unique_key_only_a_finished_job_held(driver, store_clock):
    old = enqueue_one(unique_key="k2")
    Job.objects.filter(id=old).update(state="completed")
    again = row(store_clock, unique_key="k2")
    assert driver.insert_jobs(connection, [again], set()) == {again["id"]}
    assert driver.key_holders(connection, {"k2"}) == {"k2": again["id"]}


def test_an_existing_id_raises_and_writes_nothing(driver, store_clock):
    existing = enqueue_one()
    with pytest.raises(DuplicateJobId), transaction.atomic():
        driver.insert_jobs(connection, [row(store_clock), row(store_clock, id=existing)], set())
    assert Job.objects.count() == 1


def test_ensure_queues_creates_missing_queues_once_and_leaves_a_paused_one_paused(driver, store_clock):
    Queue.objects.create(name="paused", paused=True)
    driver.ensure_queues(connection, {"paused", "new"})
    driver.ensure_queues(connection, {"new"})
    assert dict(Queue.objects.filter(name__in=["paused", "new"]).values_list("name", "paused")) == {
        "paused": True, "new": False}


def test_preflight_reads_configs_quarantine_and_existing_ids(driver, store_clock):
    existing = enqueue_one()
    TaskConfig.objects.create(task=NOOP, priority=7)
    QuarantinedFingerprint.objects.create(fingerprint="bad", job_id=existing, quarantined_at=store_clock.now())
    pre = preflight(driver, connection, [NOOP], ["bad", "good"], [existing, "missing"], "default")
    assert pre.now == store_clock.now()
    assert pre.configs[NOOP]["priority"] == 7
    assert set(pre.parked) == {"bad"} and pre.parked["bad"].job_id == existing
    assert pre.existing_id == existing


def test_preflight_finds_no_existing_id_among_new_ones(driver, store_clock):
    pre = preflight(driver, connection, [NOOP], [], ["missing"], "default")
    assert (pre.existing_id, pre.parked, pre.configs) == (None, {}, {})


@pytest.mark.django_db(transaction=True)
def test_insert_alone_inserts_a_due_row_available_and_a_later_one_scheduled(live_clock):
    driver = drivers.for_connection(connection)
    if not driver.enqueues_alone(connection):
        pytest.skip(f"{driver!r} enqueues in a store transaction")
    due = row(live_clock)
    later = row(live_clock, run_at=live_clock.now() + timedelta(minutes=1))
    assert driver.insert_alone(connection, due, None, None).state == "available"
    inserted = driver.insert_alone(connection, later, None, None)
    assert (inserted.state, inserted.run_at) == ("scheduled", later["run_at"])
    assert inserted.enqueued_at == live_clock.now()


@pytest.mark.django_db(transaction=True)
def test_insert_alone_does_not_insert_when_the_key_is_held_or_the_config_differs(live_clock):
    driver = drivers.for_connection(connection)
    if not driver.enqueues_alone(connection):
        pytest.skip(f"{driver!r} enqueues in a store transaction")
    enqueue_one(unique_key="held")
    assert driver.insert_alone(connection, row(live_clock, unique_key="held"), None, None) is None
    TaskConfig.objects.create(task=NOOP, priority=7)
    assert driver.insert_alone(connection, row(live_clock), None, None) is None
    assumed = preflight(driver, connection, [NOOP], [], [], "default").configs[NOOP]
    assert assumed["priority"] == 7
    assert driver.insert_alone(connection, row(live_clock), assumed, None) is not None


def test_does_not_enqueue_alone_inside_a_transaction(driver, store_clock):
    with transaction.atomic():
        assert not driver.enqueues_alone(connection)
