"""Django's own backend tests (tests/tasks/test_immediate_backend.py, test_tasks.py), run
against boson with the jobs going through a real worker (``boson_worker --burst``).

Where a queue with retries and a store clock answers differently from Django's
ImmediateBackend, the difference is the one docs/tasks.md states.
"""

from __future__ import annotations

import logging
import pickle
import sys
from datetime import timedelta, timezone

import pytest
from asgiref.sync import async_to_sync

from boson_django.backend import BosonBackend
from boson_django.compat import (
    TaskResultDoesNotExist,
    TaskResultStatus,
    tasks_logger,
)
from tests.conftest import EPOCH
from tests.testapp import contract_tasks
from tests.testapp.tasks import add, async_add, chooses, ephemeral, exits, fail, noop, returns_set
from tests.signals import SignalLog
from tests.worker.conftest import burst


def _heard(name, sender, result):
    """A task signal as these tests compare it: (name, sender, status, id, started_at,
    finished_at, the exception active while it was sent)."""
    return (name, sender, result.status, result.id, result.started_at, result.finished_at, sys.exc_info()[0])


@pytest.fixture(autouse=True)
def _clear_seen():
    contract_tasks.SEEN.clear()
    yield
    contract_tasks.SEEN.clear()


@pytest.mark.parametrize("task", [noop, async_add.using(priority=1)], ids=["sync", "async"])
def test_an_enqueued_task_runs_in_the_worker(live_clock, task):
    args = () if task is noop else (1, 2)
    result = task.enqueue(*args)
    burst()
    assert result.status == TaskResultStatus.READY  # a result is a snapshot until refreshed
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    assert result.attempts == 1 and len(result.worker_ids) == 1
    assert result.errors == []
    assert result.return_value == (None if task is noop else 3)
    assert result.task == task


@pytest.mark.parametrize(("task", "arg", "exception", "message"), [
    (fail, "boom", ValueError, "boom"),
    (exits, 3, SystemExit, "3"),
])
def test_a_failing_task_records_its_error(live_clock, task, arg, exception, message):
    result = task.using(max_attempts=1).enqueue(arg)
    burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.is_finished
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    assert result.enqueued_at <= result.started_at <= result.finished_at
    (error,) = result.errors
    assert error.exception_class is exception
    assert error.traceback.endswith(f"{exception.__name__}: {message}\n"), error.traceback


def test_a_return_value_json_cannot_hold_fails_with_a_type_error(live_clock):
    result = returns_set.using(max_attempts=1).enqueue(1)
    burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result._return_value is None
    assert result.errors[0].exception_class is TypeError


def test_get_result_of_an_unknown_id(live_clock):
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("123")
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(add.aget_result)("123")


def test_a_task_and_its_result_pickle(live_clock):
    """Django 6 pickles a Task by its module path; its TaskResult with it (boson's tasks
    on the backport too: tests/test_backend_pickle.py)."""
    assert pickle.loads(pickle.dumps(add)) == add
    result = add.enqueue(1, 2)
    assert pickle.loads(pickle.dumps(result)) == result
    burst()
    done = add.get_result(result.id)
    assert pickle.loads(pickle.dumps(done)).return_value == 3


# -- signals, sent by the worker ------------------------------------------------------------


def test_signals_of_a_successful_task_from_the_worker(live_clock):
    with SignalLog(_heard) as heard:
        result = add.enqueue(1, 2)
        burst()
    assert [e[:4] for e in heard.events] == [
        ("enqueued", BosonBackend, TaskResultStatus.READY, result.id),
        ("started", BosonBackend, TaskResultStatus.RUNNING, result.id),
        ("finished", BosonBackend, TaskResultStatus.SUCCESSFUL, result.id),
    ]
    assert [e[4:] for e in heard.events] == [(None, None, None), (EPOCH, None, None), (EPOCH, EPOCH, None)]


def test_a_job_deleted_at_its_ack_finishes_on_the_store_clock(live_clock):
    """``retention_ms=0``: the job is gone when ``task_finished`` is sent; the result it
    carries says when it finished by the store clock, as every other result does (the
    worker's own clock put it years before it started, under a frozen store clock)."""
    with SignalLog(_heard) as heard:
        ephemeral.enqueue()
        burst()
    assert [(e[0], e[2], e[4], e[5]) for e in heard.events[1:]] == [
        ("started", TaskResultStatus.RUNNING, EPOCH, None),
        ("finished", TaskResultStatus.SUCCESSFUL, EPOCH, EPOCH),
    ]


def test_a_job_deleted_at_its_ack_finishes_on_the_store_clock_inline(store_clock):
    from boson_django.testing import run_until_idle

    with SignalLog(_heard) as heard:
        ephemeral.enqueue()
        run_until_idle()
    assert [(e[0], e[5]) for e in heard.events] == [("enqueued", None), ("started", None), ("finished", EPOCH)]


def test_task_finished_of_a_failure_is_sent_with_its_exception_active(live_clock):
    """Django's backends send ``task_finished`` for a failure inside the ``except`` that
    caught it, and its logging receiver attaches that exception (what error monitoring
    reads); a success is sent with none."""
    with SignalLog(_heard) as heard:
        fail.using(max_attempts=1).enqueue("boom")
        add.enqueue(1, 2)
        burst()
    finished = sorted((e[2], e[6]) for e in heard.events if e[0] == "finished")
    assert finished == [(TaskResultStatus.FAILED, ValueError), (TaskResultStatus.SUCCESSFUL, None)]


def test_the_failure_log_line_carries_the_exception(live_clock, caplog):
    """As Django's ImmediateBackend test asserts: the ERROR line of a failed task holds
    the exception's message (its traceback is attached), and no line says ``NoneType``."""
    with caplog.at_level(logging.DEBUG, logger=tasks_logger.name):
        result = fail.using(max_attempts=1).enqueue("This Task failed due to ValueError")
        burst()
    lines = [r for r in caplog.records if r.name == tasks_logger.name]
    failed = [r for r in lines if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failed] == [f"Task id={result.id} path={fail.module_path} state=FAILED"]
    assert failed[0].exc_info is not None and failed[0].exc_info[0] is ValueError
    assert "This Task failed due to ValueError" in caplog.text
    assert "NoneType" not in caplog.text


def test_the_failure_log_line_carries_the_exception_inline(store_clock, caplog):
    from boson_django.testing import run_until_idle

    with caplog.at_level(logging.ERROR, logger=tasks_logger.name):
        fail.using(max_attempts=1).enqueue("inline failure")
        run_until_idle()
    (record,) = [r for r in caplog.records if r.name == tasks_logger.name]
    assert record.exc_info is not None and record.exc_info[0] is ValueError


# -- context ------------------------------------------------------------------------------------


def test_context_in_the_worker(live_clock):
    result = contract_tasks.records_context.using(max_attempts=2).enqueue(1)
    burst()
    live_clock.advance(3_600_000)
    burst()
    assert [(s["attempt"], s["result_attempts"], s["status"], s["id"]) for s in contract_tasks.SEEN] == [
        (1, 1, TaskResultStatus.RUNNING, result.id), (2, 2, TaskResultStatus.RUNNING, result.id),
    ]
    final = contract_tasks.records_context.get_result(result.id)
    assert (final.status, final.return_value, final.attempts, len(final.errors)) == (
        TaskResultStatus.SUCCESSFUL, 2, 2, 1)


def test_call_and_acall_run_the_function_here(live_clock):
    assert (add.call(1, 2), async_add.call(2, 3)) == (3, 5)
    assert (async_to_sync(add.acall)(3, 4), async_to_sync(async_add.acall)(4, 5)) == (7, 9)


def test_run_after_in_another_time_zone_is_the_same_instant(live_clock):
    """An aware ``run_after`` in any zone: the job is due at that instant, and its result's
    task has it back (as the same instant, in UTC)."""
    at = (EPOCH + timedelta(minutes=5)).astimezone(timezone(timedelta(hours=5)))
    result = add.using(run_after=at).enqueue(1, 1)
    assert result.task.run_after == at
    live_clock.advance(4 * 60_000)
    burst()
    assert add.get_result(result.id).status == TaskResultStatus.READY
    live_clock.advance(60_000)
    burst()
    done = add.get_result(result.id)
    assert (done.status, done.started_at) == (TaskResultStatus.SUCCESSFUL, EPOCH + timedelta(minutes=5))


def test_attempts_count_the_runs_that_spent_one(live_clock):
    """A snooze spends no attempt: ``attempts`` (``len(worker_ids)``) and the context's
    ``attempt`` count only the runs that did, in the worker as in the result."""
    result = chooses.enqueue("snooze")
    burst()
    assert chooses.get_result(result.id).attempts == 0
    live_clock.advance(5_000)
    burst()
    done = chooses.get_result(result.id)
    assert (done.status, done.return_value, done.attempts, done.errors) == (
        TaskResultStatus.SUCCESSFUL, "second run", 1, [])


def test_enqueue_validates_the_task_against_the_backend_again(live_clock):
    """Django's ``test_validate_on_enqueue``: a Task made before ``QUEUES`` changed is
    checked again when enqueued, by ``enqueue`` and ``aenqueue``; nothing is written."""
    from django.test import override_settings

    from boson_django.compat import InvalidTaskError
    from boson_django.models import Job

    elsewhere = noop.using(queue_name="unknown_queue")
    listed = {"default": {"BACKEND": "boson_django.backend.BosonBackend", "QUEUES": ["queue-1"]}}
    with override_settings(TASKS=listed):
        with pytest.raises(InvalidTaskError, match="Queue 'unknown_queue' is not valid for backend"):
            elsewhere.enqueue()
        with pytest.raises(InvalidTaskError, match="Queue 'unknown_queue' is not valid for backend"):
            async_to_sync(elsewhere.aenqueue)()
    assert not Job.objects.exists()


def test_errors_are_the_handlers_not_an_operators_actions(live_clock):
    """Django's ``errors``: one per error raised running the task. An operator's retry of
    the failed job (or release of a quarantined one) is recorded with the job's attempts,
    but raised nothing: it is no ``TaskError`` (it read as ``builtins.Exception``)."""
    from boson_django import services

    result = fail.using(max_attempts=1).enqueue("first")
    burst()
    assert services.retry(result.id) is True
    assert [e.exception_class for e in fail.get_result(result.id).errors] == [ValueError]
    burst()
    final = fail.get_result(result.id)
    assert final.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in final.errors] == [ValueError, ValueError]
