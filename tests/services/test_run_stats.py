"""SPEC section 3's run reads: ``task_run_stats(task)`` (counts per outcome, run-time
percentiles) and ``count_runs_since(at)``, with run times set by stepping the frozen
store clock between admission and ack."""

from __future__ import annotations

from datetime import timedelta

from boson_django import services
from boson_django.services import Outcome
from tests.factories import ADD, NOOP
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
