"""The worker builds no TaskResult for a task signal no one would receive.

Django's Tasks framework connects one receiver to each of ``task_started`` and
``task_finished``: it logs the result through the framework's logger. When those are
a signal's only receivers and that logger drops the line, sending the signal has no
effect anyone can see, and the worker skips building its TaskResult. Any other
receiver, or the logger letting the line through, and everything is sent as before.
"""

from __future__ import annotations

import logging

import pytest

from boson_django import taskresults
from boson_django.compat import TaskResultStatus, task_finished, task_started, tasks_logger
from tests.testapp.tasks import add
from tests.worker.conftest import burst


@pytest.fixture
def framework_logger_level():
    """Sets the framework logger's level for the test and puts the old one back (Django 6
    logs the framework's lines through ``django``, at INFO by default; the backport's
    logger is under the root logger, at WARNING)."""
    old = tasks_logger.level

    def set_level(level: int) -> None:
        tasks_logger.setLevel(level)

    yield set_level
    tasks_logger.setLevel(old)


@pytest.fixture
def built(monkeypatch):
    """The RUNNING TaskResults the worker builds, by job id (a spy on the real builder)."""
    made: list[str] = []
    real = taskresults.running_result

    def spy(unit, worker_id, backend_alias):
        made.append(unit.envelope.id)
        return real(unit, worker_id, backend_alias)

    monkeypatch.setattr(taskresults, "running_result", spy)
    return made


@pytest.mark.django_db
def test_unheard_only_when_the_framework_receivers_are_alone_and_their_logger_is_quiet(framework_logger_level):
    framework_logger_level(logging.WARNING)
    assert taskresults.unheard(task_started, "default")
    assert taskresults.unheard(task_finished, "default")
    assert not taskresults.unheard(task_finished, "default", logging.ERROR)  # a failure's line gets through

    def listener(sender, task_result, **kwargs):
        pass

    task_started.connect(listener)
    try:
        assert not taskresults.unheard(task_started, "default")
        assert taskresults.unheard(task_finished, "default")
    finally:
        task_started.disconnect(listener)
    assert taskresults.unheard(task_started, "default")

    framework_logger_level(logging.INFO)
    assert not taskresults.unheard(task_started, "default")


def test_a_job_no_one_hears_of_gets_no_task_result(live_clock, framework_logger_level, built):
    framework_logger_level(logging.WARNING)
    result = add.enqueue(2, 3)
    burst()
    assert built == []
    stored = add.get_result(result.id)
    assert stored.status == TaskResultStatus.SUCCESSFUL and stored.return_value == 5


def test_a_receiver_of_the_end_alone_still_gets_the_full_result(live_clock, framework_logger_level, built):
    framework_logger_level(logging.WARNING)
    got = []

    def on_finished(sender, task_result, **kwargs):
        got.append(task_result)

    task_finished.connect(on_finished)
    try:
        result = add.enqueue(4, 5)
        burst()
    finally:
        task_finished.disconnect(on_finished)
    assert built == [result.id]  # not at the start (no one heard), once at the end
    (finished,) = got
    stored = add.get_result(result.id)
    assert finished.id == result.id and finished.status == TaskResultStatus.SUCCESSFUL
    assert finished.return_value == 9
    for name in ("enqueued_at", "started_at", "finished_at", "last_attempted_at", "worker_ids", "args", "kwargs"):
        assert getattr(finished, name) == getattr(stored, name), name


def test_the_frameworks_lines_are_logged_when_its_logger_lets_them_through(
    live_clock, framework_logger_level, built, caplog
):
    framework_logger_level(logging.INFO)
    with caplog.at_level(logging.INFO, logger=tasks_logger.name):
        result = add.enqueue(1, 1)
        burst()
    lines = [r.getMessage() for r in caplog.records if r.name == tasks_logger.name and result.id in r.getMessage()]
    assert any("state=RUNNING" in line for line in lines), lines
    assert any("state=SUCCESSFUL" in line for line in lines), lines
    assert built == [result.id]


@pytest.mark.parametrize("async_receiver", [False, True], ids=["sent-by-boson", "sent-by-Signal.send"])
def test_a_failed_job_is_logged_without_a_stray_empty_traceback(db, caplog, async_receiver):
    """The framework logs each finished task; for a failure the Django 5.2 backport's
    receiver asks for the active exception, and a worker sends the signal after the ack,
    with none active: its line came with ``NoneType: None``. Django 6's does not. With
    an async receiver connected the signal goes through ``Signal.send``, which runs the
    receivers itself: the line is the same."""
    from boson_django.testing import run_until_idle
    from tests.testapp.tasks import fail

    async def listener(sender, task_result, **kwargs):
        pass

    if async_receiver:
        task_finished.connect(listener)
    try:
        with caplog.at_level(logging.INFO, logger=tasks_logger.name):
            fail.using(max_attempts=1).enqueue("boom")
            run_until_idle()
    finally:
        task_finished.disconnect(listener)
    (failed,) = [r for r in caplog.records if r.name == tasks_logger.name and "state=FAILED" in r.getMessage()]
    assert failed.levelno == logging.ERROR
    assert "NoneType: None" not in logging.Formatter().format(failed)
