"""Outcomes a handler chooses through its context, and rows the worker must not run."""

from __future__ import annotations

import pytest

from boson_django import services, validation
from boson_django.compat import TaskResultStatus, task_finished, task_started
from boson_django.models import Job
from tests.testapp.tasks import add, async_add, async_exits, async_interrupts, chooses, exits, fail, noop, raises_unprintable
from tests.worker.conftest import ThreadWorker, burst, job, state, wait_until


def test_snooze_reschedules_without_spending_an_attempt(live_clock):
    result = chooses.enqueue("snooze")
    burst()
    assert state(result.id) == "scheduled" and job(result.id).attempt == 0
    assert services.errors(result.id) == []
    live_clock.advance(5_000)
    burst()
    assert chooses.get_result(result.id).return_value == "second run"


def test_rate_limited_reschedules_after_its_delay(live_clock):
    result = chooses.enqueue("rate_limited")
    burst()
    assert state(result.id) == "scheduled" and job(result.id).attempt == 0
    live_clock.advance(2_000)
    burst()
    assert state(result.id) == "completed"


def test_retry_spends_an_attempt_and_runs_again_after_the_delay_it_asked_for(live_clock):
    result = chooses.using(max_attempts=3).enqueue("retry")
    burst()
    assert state(result.id) == "retryable" and job(result.id).attempt == 1
    assert (job(result.id).run_at - live_clock.now()).total_seconds() == 3.0, "its own delay, not the backoff"
    (record,) = services.errors(result.id)
    assert (record.outcome, record.error) == ("retry", "boson_django.worker.outcomes.Retry: partner busy")
    (error,) = chooses.get_result(result.id).errors
    assert error.exception_class.__name__ == "Retry"
    live_clock.advance(2_999)
    burst()
    assert state(result.id) == "retryable"
    live_clock.advance(1)
    burst()
    assert chooses.get_result(result.id).return_value == "second run"


def test_a_retry_that_spends_the_last_attempt_fails_the_job(live_clock):
    result = chooses.using(max_attempts=1).enqueue("retry")
    burst()
    assert state(result.id) == "failed"


def test_skip_ends_skipped_and_reads_successful(live_clock):
    result = chooses.enqueue("skip")
    burst()
    assert state(result.id) == "skipped"
    assert chooses.get_result(result.id).status == TaskResultStatus.SUCCESSFUL


def test_discard_fails_at_once_naming_a_real_exception_class(live_clock):
    result = chooses.using(max_attempts=5).enqueue("discard")
    burst()
    assert state(result.id) == "failed"
    (error,) = chooses.get_result(result.id).errors
    assert error.exception_class_path == "boson_django.worker.outcomes.Discard"
    assert "bad input" in error.traceback
    assert error.exception_class.__name__ == "Discard"


@pytest.mark.parametrize("name", ["os.system", "tests.testapp.tasks.no_such_task", "no_such_module.job"])
def test_unregistered_names_end_failed_and_the_worker_keeps_going(live_clock, name):
    bad = noop.enqueue()
    Job.objects.filter(id=bad.id).update(task=name)
    good = add.enqueue(1, 1)
    burst()
    assert state(bad.id) == "failed"
    (record,) = services.errors(bad.id)
    assert record.outcome == "undecodable"
    assert record.error.startswith("boson_django.worker.outcomes.UndecodableJob:")
    assert "not a task this worker can run" in record.error and name in record.error
    assert add.get_result(good.id).return_value == 2


def test_arguments_of_the_wrong_shape_are_undecodable(live_clock):
    bad = add.enqueue(1, 2)
    Job.objects.filter(id=bad.id).update(kwargs=[1])
    burst()
    assert state(bad.id) == "failed"
    assert "not a list and a dict" in services.errors(bad.id)[0].error


def test_started_and_finished_signals_carry_task_results(live_clock):
    seen: list[tuple[str, str]] = []

    def on_started(sender, task_result, **kwargs):
        seen.append(("started", task_result.status))

    def on_finished(sender, task_result, **kwargs):
        seen.append(("finished", task_result.status))

    task_started.connect(on_started)
    task_finished.connect(on_finished)
    try:
        add.enqueue(1, 2)
        burst()
    finally:
        task_started.disconnect(on_started)
        task_finished.disconnect(on_finished)
    assert seen == [("started", TaskResultStatus.RUNNING), ("finished", TaskResultStatus.SUCCESSFUL)]


def test_retention_zero_job_is_deleted_and_still_reported_finished(live_clock):
    got = []

    def on_finished(sender, task_result, **kwargs):
        got.append((task_result.status, task_result.return_value))

    task_finished.connect(on_finished)
    try:
        result = add.using(retention_ms=0).enqueue(2, 2)
        burst()
    finally:
        task_finished.disconnect(on_finished)
    assert state(result.id) is None
    assert got == [(TaskResultStatus.SUCCESSFUL, 4)]


def test_a_return_value_that_is_not_json_is_a_failure(live_clock):
    from tests.testapp.tasks import returns_set

    result = returns_set.enqueue(1)
    burst()
    assert state(result.id) == "retryable"
    assert services.errors(result.id)[0].error.startswith("builtins.TypeError: return value is not JSON serializable")


@pytest.mark.parametrize("enqueue, raised", [
    (lambda: exits.using(max_attempts=1).enqueue(3), SystemExit),
    (lambda: async_exits.using(max_attempts=1).enqueue(3), SystemExit),
    (lambda: async_interrupts.using(max_attempts=1).enqueue(), KeyboardInterrupt),
], ids=["sync-exit", "async-exit", "async-interrupt"])
def test_a_handler_calling_sys_exit_fails_its_job_and_the_worker_goes_on(live_clock, enqueue, raised):
    """As Django's own backends record it. Escaping an async handler, ``SystemExit`` ended
    the event loop every async handler shares: both jobs stayed running."""
    exited = enqueue()
    after = async_add.enqueue(1, 2)
    with ThreadWorker():
        wait_until(lambda: state(exited.id) == "failed" and state(after.id) == "completed", what="both jobs ended")
    (error,) = exited.task.get_result(exited.id).errors
    assert error.exception_class is raised
    assert async_add.get_result(after.id).return_value == 3


def test_an_exception_that_cannot_be_described_is_still_named(live_clock):
    """Its ``__str__`` raising must not put that error in the handler's exception's place."""
    result = raises_unprintable.using(max_attempts=1).enqueue()
    burst()
    (error,) = raises_unprintable.get_result(result.id).errors
    assert error.exception_class_path == "tests.testapp.tasks.Unprintable"
    assert services.errors(result.id)[0].error.startswith(
        "tests.testapp.tasks.Unprintable: <exception str() failed>\n"
    )


def test_a_huge_exception_message_is_stored_clipped_with_its_frames(live_clock):
    """A message of any size (a response body, say) was stored whole, again with each
    retry; the error keeps its class, the message's start and end and the frames."""
    message = "x" * 150_000 + "END"
    result = fail.using(max_attempts=1).enqueue(message)
    burst()
    (record,) = services.errors(result.id)
    assert len(record.error) <= validation.MAX_ERROR_CHARS
    assert record.error.startswith("builtins.ValueError: xxxx")
    assert "characters left out" in record.error and record.error.endswith("END\n")
    (error,) = fail.get_result(result.id).errors
    assert error.exception_class is ValueError
    assert 'in fail\n    raise ValueError(message)' in error.traceback
