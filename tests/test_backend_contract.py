"""SPEC section 6: BosonBackend behaves as Django documents its Tasks API.

Checked against Django's own ``BaseTaskBackend`` / ``Task`` / ``TaskResult`` /
``ImmediateBackend`` (django/tasks in Django 6.1; the django_tasks backport on 5.2).
"""

from __future__ import annotations

from asgiref.sync import async_to_sync, sync_to_async
from datetime import datetime, timedelta

import pytest
from django.test import override_settings

from boson_django.backend import BosonBackend
from boson_django.compat import (
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task,
    task_backends,
)
from boson_django.testing import run_until_idle
from tests.testapp import contract_tasks
from tests.signals import SignalLog
from tests.testapp.tasks import add, async_add, fail, send_mail

try:
    from django.tasks.exceptions import TaskResultMismatch
except ImportError:  # backport
    from django_tasks.exceptions import TaskResultMismatch


@pytest.fixture(autouse=True)
def _clear_seen():
    contract_tasks.SEEN.clear()
    yield
    contract_tasks.SEEN.clear()


def _heard(name, sender, result):
    """A task signal as the contract tests compare it: (signal name, sender, status, id,
    n errors, finished_at)."""
    return (name, sender, result.status, result.id, len(result.errors), result.finished_at)


# -- backend flags and validate_task -------------------------------------------------------


def test_supports_flags_are_all_true():
    backend = task_backends["default"]
    assert isinstance(backend, BosonBackend)
    assert (backend.supports_defer, backend.supports_async_task, backend.supports_get_result,
            backend.supports_priority) == (True, True, True, True)


def test_a_function_not_defined_at_module_level_is_an_invalid_task():
    def local():
        return 1

    with pytest.raises(InvalidTaskError, match="module level"):
        task(local)


def test_takes_context_without_a_context_first_argument_is_an_invalid_task():
    with pytest.raises(InvalidTaskError, match="context"):
        task(takes_context=True)(contract_tasks.order_marker.func)


@pytest.mark.parametrize("priority", [101, -101, 1.5])
def test_priority_out_of_range_or_fractional_is_an_invalid_task(priority):
    with pytest.raises(InvalidTaskError, match="priority"):
        add.using(priority=priority)


def test_naive_run_after_is_an_invalid_task_when_use_tz():
    with pytest.raises(InvalidTaskError, match="aware"):
        add.using(run_after=datetime(2030, 1, 1, 0, 5))


# -- enqueue / get_result ------------------------------------------------------------------


def test_enqueue_returns_a_ready_result_with_its_fields(store_clock):
    result = add.using(priority=3).enqueue(1, b=2)
    assert result.status == TaskResultStatus.READY
    assert isinstance(result.id, str) and result.id
    assert (result.args, result.kwargs, result.backend) == ([1], {"b": 2}, "default")
    assert result.enqueued_at == store_clock.now()
    assert (result.started_at, result.finished_at, result.last_attempted_at) == (None, None, None)
    assert (result.errors, result.worker_ids, result.attempts, result.is_finished) == ([], [], 0, False)
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value


def test_enqueue_result_equals_get_result_on_a_running_store_clock(db):
    """No frozen clock: the enqueued_at the caller gets is the one stored."""
    result = add.enqueue(4, 5)
    again = add.get_result(result.id)
    for field in ("id", "status", "enqueued_at", "started_at", "finished_at", "last_attempted_at",
                  "args", "kwargs", "backend", "errors", "worker_ids"):
        assert getattr(result, field) == getattr(again, field), field


@pytest.mark.parametrize("bad_id", ["00000000-0000-7000-8000-000000000000", "not-an-id", "", "a\x00b", "\ud800"])
def test_get_result_of_an_unknown_id_raises_task_result_does_not_exist(store_clock, bad_id):
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(bad_id)
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(bad_id)


def test_get_result_of_another_tasks_id_raises_mismatch(store_clock):
    other = send_mail.enqueue("a@x")
    with pytest.raises(TaskResultMismatch):
        add.get_result(other.id)


def test_refresh_picks_up_the_run(store_clock):
    result = add.enqueue(2, 3)
    run_until_idle()
    assert result.status == TaskResultStatus.READY
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.attempts == 1 and len(result.worker_ids) == 1
    assert result.started_at is not None and result.finished_at is not None
    assert result.last_attempted_at is not None


def test_return_value_is_normalised_json(store_clock):
    result = contract_tasks.returns_tuple.enqueue()
    run_until_idle()
    assert contract_tasks.returns_tuple.get_result(result.id).return_value == [1, "a", [2, 3]]


def test_failed_result_return_value_raises_task_failed(store_clock):
    result = contract_tasks.fails_then.using(max_attempts=1).enqueue(7)
    run_until_idle()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.is_finished
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    (error,) = result.errors
    assert error.exception_class is RuntimeError
    assert error.exception_class_path == "builtins.RuntimeError"
    assert "RuntimeError: boom 7" in error.traceback
    assert result.finished_at is not None
    assert result.attempts == 1


# -- run_after, priority --------------------------------------------------------------------


def test_run_after_defers_until_due(store_clock):
    later = store_clock.now() + timedelta(minutes=5)
    result = add.using(run_after=later).enqueue(1, 1)
    assert result.task.run_after == later
    assert run_until_idle() == 0
    assert add.get_result(result.id).status == TaskResultStatus.READY
    store_clock.advance(5 * 60_000)
    assert run_until_idle() == 1
    assert add.get_result(result.id).return_value == 2


def test_higher_priority_runs_first(store_clock):
    contract_tasks.order_marker.using(priority=-10).enqueue("low")
    contract_tasks.order_marker.enqueue("mid")
    contract_tasks.order_marker.using(priority=10).enqueue("high")
    run_until_idle()
    assert contract_tasks.SEEN == ["high", "mid", "low"]


# -- context ----------------------------------------------------------------------------------


def test_context_carries_the_running_result(store_clock):
    result = contract_tasks.records_context.enqueue(0)
    run_until_idle()
    (seen,) = contract_tasks.SEEN
    assert seen["status"] == TaskResultStatus.RUNNING
    assert (seen["id"], seen["args"], seen["backend"]) == (result.id, [0], "default")
    assert seen["attempt"] == seen["result_attempts"] == 1
    assert len(seen["worker_ids"]) == 1
    assert seen["started_at"] is not None and seen["last_attempted_at"] is not None


def test_context_attempt_equals_task_result_attempts_on_retries(store_clock):
    """Django: ``TaskContext.attempt`` is ``task_result.attempts`` (len(worker_ids))."""
    result = contract_tasks.records_context.using(max_attempts=3).enqueue(2)
    for _ in range(3):
        run_until_idle()
        store_clock.advance(3_600_000)
    assert [(s["attempt"], s["result_attempts"]) for s in contract_tasks.SEEN] == [(1, 1), (2, 2), (3, 3)]
    final = contract_tasks.records_context.get_result(result.id)
    assert final.status == TaskResultStatus.SUCCESSFUL and final.return_value == 3
    assert final.attempts == 3 and len(final.errors) == 2


def test_started_at_is_the_first_start_and_last_attempted_at_the_latest(store_clock):
    """Django: ``started_at`` "the time when the Task started executing";
    ``last_attempted_at`` "the time when the most recent Task run began execution"."""
    result = contract_tasks.records_context.using(max_attempts=2).enqueue(1)
    first = store_clock.now()
    run_until_idle()
    store_clock.advance(3_600_000)
    second = store_clock.now()
    run_until_idle()
    final = contract_tasks.records_context.get_result(result.id)
    assert final.status == TaskResultStatus.SUCCESSFUL
    assert final.last_attempted_at == second
    assert final.started_at in (first, second)  # Django leaves a retry's started_at to the backend
    assert final.finished_at == second


def test_async_task_runs_with_context(store_clock):
    result = contract_tasks.async_records_context.enqueue(21)
    run_until_idle()
    assert contract_tasks.async_records_context.get_result(result.id).return_value == 42
    assert contract_tasks.SEEN == [{"attempt": 1, "result_attempts": 1}]


# -- signals ----------------------------------------------------------------------------------


def test_signals_of_a_successful_task(store_clock):
    with SignalLog(_heard) as heard:
        result = add.enqueue(1, 2)
        run_until_idle()
    assert [(e[0], e[1], e[2], e[3]) for e in heard.events] == [
        ("enqueued", BosonBackend, TaskResultStatus.READY, result.id),
        ("started", BosonBackend, TaskResultStatus.RUNNING, result.id),
        ("finished", BosonBackend, TaskResultStatus.SUCCESSFUL, result.id),
    ]
    assert heard.events[-1][5] is not None  # finished_at set when task_finished fires


def test_a_failing_task_still_sends_task_finished_failed(store_clock):
    with SignalLog(_heard) as heard:
        result = fail.using(max_attempts=1).enqueue("x")
        run_until_idle()
    assert [(e[0], e[2], e[4]) for e in heard.events] == [
        ("enqueued", TaskResultStatus.READY, 0),
        ("started", TaskResultStatus.RUNNING, 0),
        ("finished", TaskResultStatus.FAILED, 1),
    ]
    assert all(e[1] is BosonBackend and e[3] == result.id for e in heard.events)
    assert heard.events[-1][5] is not None


# -- async API ----------------------------------------------------------------------------------


def test_aenqueue_aget_result_arefresh(live_clock):
    async def scenario():
        result = await add.aenqueue(3, 4)
        assert result.status == TaskResultStatus.READY
        again = await add.aget_result(result.id)
        assert (again.id, again.args) == (result.id, [3, 4])
        await sync_to_async(run_until_idle)()
        await result.arefresh()
        return result

    result = async_to_sync(scenario)()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 7


def test_aget_result_of_an_unknown_id_raises(live_clock):
    async def scenario():
        await add.aget_result("00000000-0000-7000-8000-000000000000")

    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(scenario)()


def test_async_task_enqueued_with_aenqueue(live_clock):
    async def scenario():
        return await async_add.aenqueue(2, 2)

    result = async_to_sync(scenario)()
    run_until_idle()
    assert async_add.get_result(result.id).return_value == 4


# -- using(backend=...) ------------------------------------------------------------------------

TWO_BACKENDS = {
    "default": {"BACKEND": "boson_django.backend.BosonBackend"},
    "other": {"BACKEND": "boson_django.backend.BosonBackend"},
}


def test_using_another_backend_alias(store_clock):
    with override_settings(TASKS=TWO_BACKENDS):
        with SignalLog(_heard) as heard:
            result = add.using(backend="other").enqueue(5, 6)
            assert result.backend == "other"
            assert result.task.backend == "other"
            run_until_idle()
        got = task_backends["other"].get_result(result.id)
        assert got.backend == "other" and got.task.backend == "other"
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 11
    assert [e[0] for e in heard.events] == ["enqueued", "started", "finished"]
    assert all(e[1] is BosonBackend for e in heard.events)


# -- a result read while the task runs; arguments normalised ------------------------------------


def test_get_result_while_running(store_clock):
    from boson_django import services

    result = add.enqueue(1, 2)
    (unit,) = services.admit("contract-worker", ["default"], 1)
    got = add.get_result(result.id)
    assert got.status == TaskResultStatus.RUNNING and not got.is_finished
    assert got.worker_ids == ["contract-worker"] and got.attempts == 1
    assert got.started_at == store_clock.now() == got.last_attempted_at
    assert got.finished_at is None
    with pytest.raises(ValueError, match="not finished"):
        _ = got.return_value


def test_enqueued_arguments_are_normalised_like_django(store_clock):
    """Django's TaskResult normalises args/kwargs (tuples become lists)."""
    result = contract_tasks.returns_value.enqueue((1, (2, 3)))
    assert result.args == [[1, [2, 3]]]
    assert contract_tasks.returns_value.get_result(result.id).args == [[1, [2, 3]]]


#: Return values the store cannot hold, and how the failure names them. Django's
#: ImmediateBackend keeps NaN (``normalize_json`` accepts it) and fails on an object; JSON
#: has no NaN, and PostgreSQL's jsonb no NUL: every store refuses them alike.
UNSTORABLE = {
    "nul": ("a\x00b", "boson_django.errors.InvalidEnvelope: return value: contains a NUL character"),
    "lone-surrogate": ("\ud800", "boson_django.errors.InvalidEnvelope: return value: is not valid Unicode text"),
    "nul-key": ({"k\x00": 1}, "boson_django.errors.InvalidEnvelope: return value: key 'k\\x00' contains a NUL"),
    "nested-nul": ([1, {"a": "b\x00"}], "boson_django.errors.InvalidEnvelope: return value[1]['a']: contains a NUL"),
    "nan": (float("nan"), "builtins.TypeError: return value is not JSON serializable: Out of range float"),
    "infinity": ([float("inf")], "builtins.TypeError: return value is not JSON serializable: Out of range float"),
    "object": (object(), "builtins.TypeError: return value is not JSON serializable: Object of type object"),
}


@pytest.mark.parametrize("runner", ["worker", "run_until_idle"])
@pytest.mark.parametrize("value, error", list(UNSTORABLE.values()), ids=list(UNSTORABLE))
def test_a_return_value_the_store_cannot_hold_fails_the_job_once_on_every_database(live_clock, value, error, runner):
    """The task ran to its end: a retry would run its work again only to return the same
    value. The job fails at its first attempt (DISCARD: attempts were left), on every
    database, naming ``return value`` -- it must not stay running with an ack that can
    never commit, nor succeed on SQLite and fail on PostgreSQL, nor fail every attempt."""
    from boson_django import services
    from tests.worker.conftest import burst

    run = burst if runner == "worker" else run_until_idle
    result = contract_tasks.returns_value.using(max_attempts=5).enqueue(0)
    contract_tasks.RETURN_OVERRIDE[result.id] = value
    run()
    live_clock.advance(3_600_000)  # past any retry's backoff, well within the job's retention
    run()
    (record,) = services.errors(result.id)
    assert record.outcome == "discard" and record.error.startswith(error)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    assert result._return_value is None
    (failure,) = result.errors
    assert failure.exception_class_path == error.split(":", 1)[0]
