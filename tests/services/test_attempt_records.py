"""SPEC section 2, the attempt-record rule, with section 3's ``errors(id)`` shape: closed
records only, oldest first, each with attempt, fence, outcome, error, logs and at;
recorded for success-with-logs, retry, skip, undecodable, discard, lease lost, release,
cancel; never for snooze, rate_limited, revoke or a success without logs."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from collections.abc import Callable

import pytest

from boson_django import services
from boson_django.services import Outcome
from tests.factories import enqueue_one
from tests.services.support import LEASE_MS, Driven, job_row, run_rows, start_job

LOGS = ["line one", "line two"]

#: How each recorded event is caused, and the outcome its record carries.
RECORDED: dict[str, tuple[Callable[[Driven, Any], Any], str]] = {
    "success-with-logs": (lambda d, c: services.ack(d.lease, Outcome.SUCCESS, logs=LOGS), "success"),
    "retry": (lambda d, c: services.ack(d.lease, Outcome.RETRY, error="E", logs=LOGS), "retry"),
    "skip": (lambda d, c: services.ack(d.lease, Outcome.SKIP, error="E", logs=LOGS), "skip"),
    "undecodable": (lambda d, c: services.ack(d.lease, Outcome.UNDECODABLE, error="E", logs=LOGS), "undecodable"),
    "discard": (lambda d, c: services.ack(d.lease, Outcome.DISCARD, error="E", logs=LOGS), "discard"),
    "lease-lost": (lambda d, c: (c.advance(LEASE_MS), services.reclaim_expired(10)), "lease_lost"),
    "release": (lambda d, c: services.release(d.lease), "released"),
    "cancel": (lambda d, c: services.cancel(d.job_id), "cancelled"),
}

#: Events that close the run without an attempt record (the job survives each).
UNRECORDED: dict[str, Callable[[Driven], Any]] = {
    "snooze": lambda d: services.ack(d.lease, Outcome.SNOOZE, delay_ms=10, logs=LOGS),
    "rate-limited": lambda d: services.ack(d.lease, Outcome.RATE_LIMITED, delay_ms=10, logs=LOGS),
    "success-without-logs": lambda d: services.ack(d.lease, Outcome.SUCCESS),
}


@pytest.mark.parametrize("event", RECORDED)
def test_each_recorded_event_adds_one_closed_record_of_that_attempt(store_clock, event):
    cause, outcome = RECORDED[event]
    driven = start_job()
    assert services.errors(driven.job_id) == []
    store_clock.advance(7)
    cause(driven, store_clock)
    (record,) = services.errors(driven.job_id)
    assert (record.attempt, record.fence, record.outcome) == (1, 1, outcome)
    assert isinstance(record.error, str) and isinstance(record.at, datetime)
    assert record.at == store_clock.now()
    assert isinstance(record.logs, list) and all(isinstance(line, str) for line in record.logs)
    if event.startswith(("success", "retry", "skip", "undecodable", "discard")):
        assert record.logs == LOGS
    if outcome in ("retry", "skip", "undecodable", "discard"):
        assert record.error == "E"
    if outcome in ("lease_lost", "cancelled"):
        assert record.error


@pytest.mark.parametrize("event", UNRECORDED)
def test_unrecorded_events_add_nothing(store_clock, event):
    driven = start_job()
    UNRECORDED[event](driven)
    assert services.errors(driven.job_id) == []
    (run,) = run_rows(driven.job_id)
    assert run["finished_at"] == store_clock.now()
    assert run["recorded"] is False


def test_revoke_adds_nothing_because_the_job_is_gone(store_clock):
    driven = start_job()
    services.ack(driven.lease, Outcome.REVOKE, error="E", logs=LOGS)
    assert services.errors(driven.job_id) == []


def test_an_open_run_is_not_an_attempt_record(store_clock):
    driven = start_job()
    assert len(run_rows(driven.job_id)) == 1
    assert services.errors(driven.job_id) == []


def test_records_are_oldest_first_and_each_keeps_its_own_logs(store_clock):
    driven = start_job(max_attempts=5)
    services.ack(driven.lease, Outcome.RETRY, delay_ms=0, error="first", logs=["a1"])
    store_clock.advance(1)
    services.promote_due(10)
    second = services.admit("w2", ["walk"], 1)[0]
    store_clock.advance(LEASE_MS)
    services.reclaim_expired(10)
    third = services.admit("w3", ["walk"], 1)[0]
    store_clock.advance(1)
    services.ack(third.lease, Outcome.SNOOZE, delay_ms=1, logs=["snoozed, not recorded"])
    store_clock.advance(1)
    services.promote_due(10)
    fourth = services.admit("w4", ["walk"], 1)[0]
    store_clock.advance(1)
    services.release(fourth.lease)
    fifth = services.admit("w5", ["walk"], 1)[0]
    store_clock.advance(1)
    services.ack(fifth.lease, Outcome.SUCCESS, logs=["done"])

    records = services.errors(driven.job_id)
    assert [r.outcome for r in records] == ["retry", "lease_lost", "released", "success"]
    assert [r.fence for r in records] == [1, second.lease.fence, fourth.lease.fence, fifth.lease.fence]
    assert [r.attempt for r in records] == [1, 2, 2, 2]
    assert [r.logs for r in records] == [["a1"], [], [], ["done"]]
    assert [r.at for r in records] == sorted(r.at for r in records)
    assert job_row(driven.job_id)["attempt"] == 2


def test_cancel_of_a_job_that_never_ran_is_recorded(store_clock):
    job_id = enqueue_one()
    services.cancel(job_id)
    (record,) = services.errors(job_id)
    assert (record.outcome, record.fence, record.logs) == ("cancelled", 0, [])
