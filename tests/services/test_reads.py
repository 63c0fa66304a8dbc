"""SPEC section 3's list and run reads: ``task_run_stats(task)`` (counts per outcome,
run-time percentiles), ``count_runs_since(at)``, ``list_jobs`` and ``list_runs``; run
times set by stepping the frozen store clock between admission and ack."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from boson_django import services
from boson_django.errors import InvalidEnvelope
from boson_django.services import Outcome
from boson_django.states import JobState
from tests.factories import ADD, NOOP, admit_one, enqueue_one
from tests.services.support import start_job

#: How long each run of NOOP takes (ms), and how it ends.
RUNS = [(40, Outcome.SUCCESS), (10, Outcome.SUCCESS), (50, Outcome.RETRY), (30, Outcome.SKIP), (20, Outcome.SUCCESS)]


def _run(clock, took_ms: int, outcome: Outcome, task: str = NOOP) -> None:
    driven = start_job(task=task, args=[1, 2] if task == ADD else [])
    clock.advance(took_ms)
    services.ack(driven.lease, outcome, error="E" if outcome is not Outcome.SUCCESS else None)


def test_counts_per_outcome_and_nearest_rank_percentiles_of_finished_runs(store_clock):
    for took_ms, outcome in RUNS:
        _run(store_clock, took_ms, outcome)
    _run(store_clock, 900, Outcome.SUCCESS, task=ADD)  # another task's run: not counted
    start_job()  # still running: not finished, not counted
    stats = services.task_run_stats(NOOP)
    assert stats["task"] == NOOP and stats["runs"] == 5
    assert stats["outcomes"] == {"success": 3, "retry": 1, "skip": 1}
    # sorted 10, 20, 30, 40, 50: p50 is rank 2 of 0..4, p95 rank round(3.8) = 4
    assert (stats["p50_ms"], stats["p95_ms"]) == (30.0, 50.0)


def test_a_task_with_no_finished_run_has_no_percentiles(store_clock):
    start_job()
    assert services.task_run_stats(NOOP) == {"task": NOOP, "runs": 0, "outcomes": {}, "p50_ms": None, "p95_ms": None}


def test_since_keeps_the_runs_started_at_or_after_it(store_clock):
    _run(store_clock, 900, Outcome.RETRY)
    since = store_clock.now()
    _run(store_clock, 10, Outcome.SUCCESS)
    _run(store_clock, 20, Outcome.SUCCESS)
    stats = services.task_run_stats(NOOP, since=since)
    assert stats["runs"] == 2 and stats["outcomes"] == {"success": 2}
    assert (stats["p50_ms"], stats["p95_ms"]) == (10.0, 20.0)  # ranks round(0.5) = 0 and round(0.95) = 1
    assert services.task_run_stats(NOOP)["runs"] == 3


def test_count_runs_since_counts_runs_started_at_or_after_it_open_or_closed(store_clock):
    _run(store_clock, 10, Outcome.SUCCESS)
    at = store_clock.now()
    _run(store_clock, 10, Outcome.RETRY, task=ADD)
    start_job()  # open
    assert services.count_runs_since(at) == 2
    assert services.count_runs_since(at - timedelta(milliseconds=10)) == 3
    assert services.count_runs_since(store_clock.now() + timedelta(milliseconds=1)) == 0


# -- list_jobs and list_runs -------------------------------------------------------------

def test_list_jobs_orders_by_queue_then_priority_then_age_and_filters(store_clock):
    low = enqueue_one(queue="b", priority=0)
    store_clock.advance(1)
    high = enqueue_one(queue="b", priority=5)
    store_clock.advance(1)
    later_low = enqueue_one(queue="b", priority=0)
    other_queue = enqueue_one(ADD, queue="a", args=[1, 2])
    due_later = enqueue_one(queue="b", priority=5, run_at=store_clock.now() + timedelta(seconds=1))
    assert [j.id for j in services.list_jobs()] == [other_queue, high, due_later, low, later_low]
    assert [j.id for j in services.list_jobs(queue="b", offset=1, limit=2)] == [due_later, low]
    assert [j.id for j in services.list_jobs(task=ADD)] == [other_queue]
    assert [j.id for j in services.list_jobs(state="scheduled")] == [due_later]
    assert [j.id for j in services.list_jobs(state=JobState.SCHEDULED)] == [due_later]
    assert services.list_jobs(limit=0) == []


def test_list_jobs_rows_carry_no_payload_or_result(store_clock):
    driven = start_job(task=ADD, args=[1, 2], kwargs={"secret": "x" * 50})
    services.ack(driven.lease, Outcome.SUCCESS, result={"sum": 3})
    (info,) = services.list_jobs()
    assert info.id == driven.job_id and info.state == "completed" and info.attempt == 1
    fields = {f.name for f in dataclasses.fields(info)}
    assert not fields & {"args", "kwargs", "meta", "result", "checkpoint"}


def test_list_runs_newest_first_of_every_job_or_of_one(store_clock):
    first = start_job()
    services.ack(first.lease, Outcome.RETRY, error="E")
    store_clock.advance(60_000)  # past the backoff
    services.promote_due(10)
    again = admit_one("w2", ["walk"])
    store_clock.advance(1)
    other = start_job(task=ADD, args=[1, 2])
    runs = services.list_runs()
    assert [(r.job_id, r.attempt, r.worker_id) for r in runs] == [
        (other.job_id, 1, "w1"), (first.job_id, 2, "w2"), (first.job_id, 1, "w1")]
    assert [r.fence for r in services.list_runs(job_id=first.job_id)] == [again.lease.fence, first.lease.fence]
    assert [r.job_id for r in services.list_runs(offset=1, limit=1)] == [first.job_id]
    assert runs[2].outcome == "retry" and runs[2].error == "E" and runs[0].finished_at is None


@pytest.mark.parametrize("call, field", [
    (lambda: services.list_jobs(state="finished"), "state"),
    (lambda: services.list_jobs(queue=""), "queue"),
    (lambda: services.list_jobs(task=5), "task"),
    (lambda: services.counts(""), "queue"),
    (lambda: services.counts(5), "queue"),
    (lambda: services.list_jobs(offset=-1), "offset"),
    (lambda: services.list_jobs(limit=1.5), "limit"),
    (lambda: services.list_runs(limit=-1), "limit"),
    (lambda: services.list_runs(offset="0"), "offset"),
    (lambda: services.count_runs_since(datetime(2030, 1, 1)), "at"),
    (lambda: services.task_run_stats(""), "task"),
    (lambda: services.task_run_stats(NOOP, since="yesterday"), "since"),
])
def test_reads_refuse_bad_arguments_naming_them(store_clock, call, field):
    with pytest.raises(InvalidEnvelope) as caught:
        call()
    assert caught.value.field == field and field in str(caught.value)


def test_task_run_stats_leave_out_the_records_of_events_that_ran_no_handler(store_clock):
    """A cancel of a waiting job, an operator's retry: records with no worker and no run
    time. Counted, they made 'finished runs' of them and pulled the percentiles to 0 ms."""
    _run(store_clock, 40, Outcome.SUCCESS)
    failed = start_job(max_attempts=1)
    store_clock.advance(60)
    services.ack(failed.lease, Outcome.RETRY, error="E")
    assert services.retry(failed.job_id)
    assert services.cancel(failed.job_id)  # waiting again: cancelled with no handler running
    waiting = enqueue_one(NOOP, queue="walk")
    assert services.cancel(waiting)
    stats = services.task_run_stats(NOOP)
    assert stats["runs"] == 2 and stats["outcomes"] == {"success": 1, "retry": 1}
    assert (stats["p50_ms"], stats["p95_ms"]) == (40.0, 60.0)


def test_percentiles_are_the_run_times_in_milliseconds_without_float_noise(store_clock):
    """A run of 572 microseconds is 0.572 ms (``total_seconds() * 1000`` said
    0.5720000000000001, which the docs and the admin then showed)."""
    _run(store_clock, 0.572, Outcome.SUCCESS)
    stats = services.task_run_stats(NOOP)
    assert (stats["p50_ms"], stats["p95_ms"]) == (0.572, 0.572)
