"""The TaskResult of a job that ran, field by field as Django's own backends build it."""

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from boson_django import registry, services
from boson_django.compat import TaskResultStatus, task_backends, task_finished, task_started
from boson_django.models import Job
from boson_django.taskresults import task_error
from boson_django.testing import run_until_idle
from tests.testapp.tasks import add, chooses, fail, send_mail

try:
    from django.tasks.exceptions import TaskResultMismatch
except ImportError:  # the backport
    from django_tasks.exceptions import TaskResultMismatch


def test_error_traceback_is_the_python_traceback_alone(store_clock):
    """Django's backends store ``"".join(traceback.format_exception(exc))``: no line before it."""
    result = fail.enqueue("boom")
    run_until_idle()
    result.refresh()
    (error,) = result.errors
    assert error.exception_class is ValueError
    assert error.traceback.startswith("Traceback (most recent call last):\n")
    assert error.traceback.endswith("ValueError: boom\n")


def test_error_without_a_traceback_keeps_its_line(store_clock):
    """A discard, a timeout or a cancel has no Python traceback: the stored line is all."""
    result = chooses.enqueue("discard")
    run_until_idle()
    result.refresh()
    (error,) = result.errors
    assert error.exception_class_path == "boson_django.worker.outcomes.Discard"
    assert error.traceback == "boson_django.worker.outcomes.Discard: bad input"


def test_a_multiline_reason_is_not_taken_for_a_traceback():
    error = task_error("boson_django.worker.outcomes.Discard: bad\ninput")
    assert error.traceback == "boson_django.worker.outcomes.Discard: bad\ninput"


def test_get_result_task_is_the_declared_task_when_nothing_was_overridden(store_clock):
    result = add.enqueue(1, 2)
    assert add.get_result(result.id).task is add


def test_get_result_task_carries_the_stored_priority_queue_and_run_after(store_clock):
    """As Django's database backend rebuilds it: a ``.using(...)`` copy's values come
    back from the row, not the declared task's."""
    later = store_clock.now() + timedelta(minutes=5)
    sent = add.using(priority=50, queue_name="urgent", run_after=later)
    task = add.get_result(sent.enqueue(1, 2).id).task
    assert (task.priority, task.queue_name, task.run_after, task.backend) == (50, "urgent", later, "default")
    assert (task.module_path, task.func) == (add.module_path, add.func)
    assert registry.get(add.module_path) is add  # the copy registered nothing


def test_get_result_task_has_the_queue_a_task_config_routed_it_to(store_clock):
    services.set_task_config(send_mail.module_path, queue="mail", priority=7)
    task = send_mail.get_result(send_mail.enqueue("a@x").id).task
    assert (task.queue_name, task.priority) == ("mail", 7)
    assert (send_mail.queue_name, send_mail.priority) == ("default", 0)


def test_get_result_of_a_job_whose_queue_is_no_longer_listed(store_clock):
    """``QUEUES`` narrowed after the enqueue: the stored queue is reported, not refused."""
    job_id = add.using(queue_name="old").enqueue(1, 2).id
    listed = {"default": {"BACKEND": "boson_django.backend.BosonBackend", "QUEUES": ["default"]}}
    with override_settings(TASKS=listed):
        result = add.get_result(job_id)
    assert result.task.queue_name == "old"


def test_started_and_finished_signals_carry_the_stored_task(store_clock):
    seen = []

    def heard(sender, task_result, **kwargs):
        seen.append((task_result.status, task_result.task.priority, task_result.task.queue_name))

    task_started.connect(heard)
    task_finished.connect(heard)
    try:
        add.using(priority=-20, queue_name="low").enqueue(1, 2)
        run_until_idle()
    finally:
        task_started.disconnect(heard)
        task_finished.disconnect(heard)
    assert seen == [(TaskResultStatus.RUNNING, -20, "low"), (TaskResultStatus.SUCCESSFUL, -20, "low")]


def test_a_retry_backoff_shows_as_run_after(store_clock):
    """A job waiting out a retry is next due later than it was enqueued: that is its
    ``run_after``, the earliest time it will run."""
    result = fail.enqueue("once")
    run_until_idle()
    job = Job.objects.get(id=result.id)
    assert job.state == "retryable"
    assert fail.get_result(result.id).task.run_after == job.run_at > job.enqueued_at


@override_settings(BOSON={"CRASH_LIMIT": 1, "TASK_MODULES": ["tests.testapp.more_tasks"]})
def test_a_quarantined_job_is_failed_and_finished_when_it_was_parked(store_clock):
    """FAILED is a finished status in Django: a quarantined job's result says when it
    was parked (its crash reaching the limit; a twin's parking at enqueue)."""
    first = add.enqueue(6, 7)
    services.admit("w", ["default"], 1, lease_ms=1_000)
    store_clock.advance(1_000)
    (reclaimed,) = services.reclaim_expired()
    assert reclaimed.state == "quarantined"
    parked_at = store_clock.now()
    store_clock.advance(60_000)
    twin = add.enqueue(6, 7)
    assert Job.objects.get(id=twin.id).state == "quarantined"
    for job_id, at in ((first.id, parked_at), (twin.id, store_clock.now())):
        result = add.get_result(job_id)
        assert (result.status, result.finished_at) == (TaskResultStatus.FAILED, at)
    services.release_quarantined(first.id)
    released = add.get_result(first.id)
    assert released.status == TaskResultStatus.READY
    assert [e.exception_class_path for e in released.errors] == ["boson_django.errors.LeaseLost"]


def test_each_attempt_sends_started_and_finished_a_retried_one_finishing_ready(store_clock):
    """The signals pair up per attempt (docs/tasks.md): an attempt that will be retried
    finishes READY with its error; the last one FAILED with both."""
    seen = []

    def heard(sender, task_result, **kwargs):
        seen.append((task_result.status, len(task_result.errors)))

    task_started.connect(heard)
    task_finished.connect(heard)
    try:
        fail.using(max_attempts=2).enqueue("twice")
        run_until_idle()
        store_clock.advance(3_600_000)  # past the backoff
        run_until_idle()
    finally:
        task_started.disconnect(heard)
        task_finished.disconnect(heard)
    assert seen == [
        (TaskResultStatus.RUNNING, 0), (TaskResultStatus.READY, 1),
        (TaskResultStatus.RUNNING, 1), (TaskResultStatus.FAILED, 2),
    ]


def test_a_skipped_job_has_no_errors(store_clock):
    """A skip ends the job SUCCESSFUL: its reason is kept with the attempt (the admin,
    ``services.errors``) but is no error (it read as a ``builtins.nothing`` exception
    whose ``exception_class`` raised ImportError)."""
    result = chooses.enqueue("skip")
    run_until_idle()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.errors == []
    assert [record.error for record in services.errors(result.id)] == ["nothing to do"]


#: Names a job row may hold that this process cannot resolve to a Task: a module that is
#: not there (a task renamed or removed in a deploy), a module-level object that is not a
#: Task, a function of an importable module that is no task.
UNRESOLVED = ["vanished.tasks.rebuild", "tests.testapp.tasks.worker_log", "os.path.join"]


@pytest.mark.parametrize("name", UNRESOLVED)
def test_a_result_whose_task_cannot_be_resolved_is_read_from_its_row(store_clock, name):
    """Django: ``get_result`` returns the result or raises ``TaskResultDoesNotExist``;
    it raised ``LookupError``. The result comes from the row, with a stand-in Task whose
    ``module_path`` is the stored name, and one that cannot be run."""
    sent = add.using(priority=5, queue_name="q").enqueue(2, 3)
    run_until_idle()
    Job.objects.filter(id=sent.id).update(task=name)
    backend = task_backends["default"]
    for got in (backend.get_result(sent.id), async_to_sync(backend.aget_result)(sent.id)):
        assert (got.id, got.status, got.args, got.kwargs, got.return_value) == (sent.id, TaskResultStatus.SUCCESSFUL, [2, 3], {}, 5)
        assert got.task.module_path == name
        assert (got.task.priority, got.task.queue_name, got.task.backend, got.task.run_after) == (5, "q", "default", None)
        with pytest.raises(LookupError, match="cannot be resolved in this process"):
            got.task.call(2, 3)
    with pytest.raises(TaskResultMismatch):
        add.get_result(sent.id)  # Django's check that the result is the task's


@pytest.mark.parametrize("name", UNRESOLVED)
def test_refresh_of_a_result_whose_task_cannot_be_resolved(store_clock, name):
    sent = add.enqueue(1, 1)
    Job.objects.filter(id=sent.id).update(task=name)
    sent.refresh()
    async_to_sync(sent.arefresh)()
    assert sent.status == TaskResultStatus.READY
    assert add.get_result(add.enqueue(1, 2).id).task is add  # a task that resolves is unaffected
