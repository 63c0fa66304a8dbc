"""What a job leaves behind: its objects go when it is acked, by reference counting,
and the collector's first threshold is the worker's while it runs, then put back."""

from __future__ import annotations

import gc
import logging
import threading

import pytest
from django.test import override_settings

from boson_django.compat import tasks_logger
from boson_django.worker import gctuning
from boson_django.worker.attempt import Attempt
from tests.testapp import tasks
from tests.worker.conftest import burst, state


def _join_threads_started_since(before: set[threading.Thread]) -> None:
    """The burst's pool and ack threads end once it returns (and hold the last job's
    objects until they do); threads of anything else still running are left alone."""
    for thread in set(threading.enumerate()) - before:
        thread.join(10)
        assert not thread.is_alive(), f"{thread.name} did not end"


@pytest.mark.parametrize("failing", [False, True], ids=["succeeding", "failing"])
def test_a_drained_jobs_objects_are_freed_without_the_collector(live_clock, failing, monkeypatch):
    """A failure's exception, kept for ``task_finished`` (sent while it is handled), holds
    the handler's frames: it must not keep them, and the attempt, alive after the ack."""
    # pytest keeps every log record for its report, and a failure's "Task ... FAILED"
    # record holds the traceback (as any handler that keeps records would).
    monkeypatch.setattr(logging.getLogger(tasks_logger.name), "propagate", False)
    if failing:
        ids = [tasks.fail.using(max_attempts=1).enqueue(f"job {i}").id for i in range(30)]
    else:
        ids = [tasks.add.enqueue(i, 1).id for i in range(30)]
    before = set(threading.enumerate())
    gc.collect()
    gc.disable()
    try:
        burst("--concurrency", "8")
        _join_threads_started_since(before)
        left = [o for o in gc.get_objects() if type(o) is Attempt]  # type(): lazy objects would load
    finally:
        gc.enable()
    assert {state(i) for i in ids} == {"failed" if failing else "completed"}
    assert left == []  # none kept alive by a reference cycle only the collector would break


def test_a_failed_attempt_whose_ack_is_refused_leaves_no_objects_for_the_collector(live_clock, monkeypatch):
    """No ``task_finished`` is sent for an outcome that was not stored: the failure's
    exception, and the handler's frames it holds, must go all the same."""
    monkeypatch.setattr(logging.getLogger(tasks_logger.name), "propagate", False)
    ids = [tasks.fails_after_losing_its_lease.enqueue().id for _ in range(5)]
    before = set(threading.enumerate())
    gc.collect()
    gc.disable()
    try:
        burst("--concurrency", "4")
        _join_threads_started_since(before)
        left = [o for o in gc.get_objects() if type(o) is Attempt]
    finally:
        gc.enable()
    assert {state(i) for i in ids} == {"running"}  # the refused acks stored nothing
    assert left == []


@pytest.fixture
def first_threshold():
    """Sets the collector's first threshold for the test (the others kept); puts all
    three back after it."""
    found = gc.get_threshold()
    yield lambda first: gc.set_threshold(first, *found[1:])
    gc.set_threshold(*found)


def test_the_worker_raises_the_first_threshold_while_it_runs_and_puts_it_back(live_clock, first_threshold):
    first_threshold(700)
    others = gc.get_threshold()[1:]
    raised = tasks.gc_threshold.enqueue()
    burst()
    assert tasks.gc_threshold.get_result(raised.id).return_value == 10_000
    assert gc.get_threshold() == (700, *others)
    with override_settings(BOSON={"GC_THRESHOLD": 0}):
        left_alone = tasks.gc_threshold.enqueue()
        burst()
    assert tasks.gc_threshold.get_result(left_alone.id).return_value == 700


def test_the_last_worker_to_stop_puts_the_threshold_back(first_threshold):
    first_threshold(700)
    others = gc.get_threshold()[1:]
    gctuning.raise_threshold(5_000)
    gctuning.raise_threshold(9_000)  # a second worker: the first one's setting stands
    assert gc.get_threshold()[0] == 5_000
    gctuning.restore_threshold()
    assert gc.get_threshold()[0] == 5_000  # one worker still runs
    gctuning.restore_threshold()
    assert gc.get_threshold() == (700, *others)


def test_a_higher_threshold_already_set_is_kept(first_threshold):
    first_threshold(50_000)
    gctuning.raise_threshold(10_000)
    assert gc.get_threshold()[0] == 50_000
    gctuning.restore_threshold()
    assert gc.get_threshold()[0] == 50_000
