"""enqueue -> ``boson_worker --burst`` -> ``get_result()``: the Django Tasks API end to end."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync

from boson_django import services
from boson_django.compat import TaskResultStatus
from tests.testapp.tasks import add, async_add, fail, inspect_context, noop
from tests.worker.conftest import burst, job, state


def test_plain_task_runs_and_returns_its_value(live_clock, caplog):
    result = add.enqueue(2, 3)
    burst()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text  # a clean exit
    done = add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 5
    assert done.attempts == 1 and len(done.worker_ids) == 1
    assert done.finished_at is not None and done.errors == []


def test_async_task_runs_on_the_event_loop(live_clock):
    result = async_add.enqueue(20, 22)
    burst()
    assert async_add.get_result(result.id).return_value == 42


def test_aenqueue_then_run(live_clock):
    result = async_to_sync(add.aenqueue)(1, 1)
    burst()
    assert async_to_sync(add.aget_result)(result.id).return_value == 2


def test_failure_retries_with_the_error_and_captured_logs(live_clock):
    result = fail.enqueue("boom")
    burst()
    assert state(result.id) == "retryable"
    seen = fail.get_result(result.id)
    assert seen.status == TaskResultStatus.READY
    assert [e.exception_class_path for e in seen.errors] == ["builtins.ValueError"]
    assert "boom" in seen.errors[0].traceback and "Traceback" in seen.errors[0].traceback
    (record,) = services.errors(result.id)
    assert record.outcome == "retry" and record.error.startswith("builtins.ValueError: boom")
    assert any("about to fail: boom" in line for line in record.logs)
    assert job(result.id).attempt == 1


def test_retry_runs_again_once_due_on_the_store_clock(live_clock):
    result = fail.using(max_attempts=2).enqueue("twice")
    burst()
    assert state(result.id) == "retryable"
    live_clock.advance(services.errors(result.id) and 2_000)
    burst()
    assert state(result.id) == "failed"
    assert fail.get_result(result.id).attempts == 2


def test_context_gives_attempt_job_id_and_fenced_writes(live_clock):
    result = inspect_context.enqueue("t1")
    burst()
    value = inspect_context.get_result(result.id).return_value
    assert value == {"attempt": 1, "job_id": result.id, "checkpoint": {"step": 1}}
    assert services.get_output(result.id).data == {"tag": "t1"}
    progress = services.get_progress(result.id)
    assert (progress.current, progress.total, progress.message, progress.attempt) == (1, 2, "half way", 1)


def test_queue_and_max_jobs_options(live_clock):
    other = noop.using(queue_name="other").enqueue()
    ids = [noop.enqueue().id for _ in range(3)]
    burst("--queue", "default", "--max-jobs", "2")
    assert sorted(state(i) for i in ids) == ["available", "completed", "completed"]
    assert state(other.id) == "available"
    burst("--queue", "other")
    assert state(other.id) == "completed"


def test_scheduled_job_is_promoted_when_due(live_clock):
    from datetime import timedelta

    result = add.using(run_after=live_clock.now() + timedelta(seconds=30)).enqueue(1, 2)
    burst()
    assert state(result.id) == "scheduled"
    live_clock.advance(30_000)
    burst()
    assert add.get_result(result.id).return_value == 3
