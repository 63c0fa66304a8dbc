"""Workers of this process are woken directly by jobs made available in it, on every
store: an embedded worker by the web process's enqueues, any worker by jobs its own
handlers enqueue; and told directly of a lease revoked in it (an operator's cancel). On
SQLite, where there is no NOTIFY, this is the only wake-up."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings

from boson_django import services
from boson_django.services import wakeups
from boson_django.worker.runtime import Worker, WorkerOptions
from tests.testapp.tasks import add, gated
from tests.worker.conftest import ThreadWorker, idle_worker, started_file, state, wait_until




def test_the_workers_of_the_queues_made_available_are_woken_at_commit(db, django_capture_on_commit_callbacks):
    woken: list[str] = []
    forget_mail = wakeups.wake_here(["mail"], lambda: woken.append("mail"))
    forget_every = wakeups.wake_here([], lambda: woken.append("every queue"))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            wakeups.notify_at_commit(["reports"], "default")
            assert woken == []  # not before the commit
        assert woken == ["every queue"]
        with django_capture_on_commit_callbacks(execute=True):
            wakeups.notify_at_commit(["mail", "reports", "mail"], "default")
        assert woken == ["every queue", "mail", "every queue"]
        with django_capture_on_commit_callbacks(execute=True):
            wakeups.notify_at_commit([wakeups.ANY_QUEUE], "default")  # a sweep: every worker
        assert woken[3:] == ["mail", "every queue"]
        with django_capture_on_commit_callbacks(execute=True):
            wakeups.notify_at_commit([], "default")  # nothing became available
        forget_mail()
        with django_capture_on_commit_callbacks(execute=True):
            wakeups.notify_at_commit(["mail"], "default")
        assert woken[5:] == ["every queue"]
    finally:
        forget_mail()
        forget_every()


def test_a_rolled_back_enqueue_wakes_no_one(db):
    woken: list[str] = []
    forget = wakeups.wake_here([], lambda: woken.append("woken"))
    try:
        try:
            with transaction.atomic():
                add.enqueue(1, 2)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        assert woken == []
    finally:
        forget()


def test_an_idle_worker_starts_a_job_enqueued_in_its_process_without_polling(live_clock):
    with idle_worker(NOTIFY=False) as runner:
        assert runner.worker.lifecycle.listener is None  # nothing but this process can wake it
        result = add.enqueue(2, 3)
        wait_until(lambda: state(result.id) == "completed", what="the in-process wake-up")
        batch = services.enqueue([services.Envelope(task="tests.testapp.tasks.add", args=[1, 1]) for _ in range(3)])
        wait_until(lambda: all(state(r.id) == "completed" for r in batch), what="the batch's wake-up")
    assert add.get_result(result.id).return_value == 5


def test_a_stopped_worker_is_no_longer_woken(live_clock):
    with idle_worker(NOTIFY=False) as runner:
        assert wakeups._local
    assert runner.exit_code == 0
    assert not wakeups._local


@pytest.mark.parametrize("told_by", ["this process", pytest.param("NOTIFY", marks=pytest.mark.postgres)])
def test_a_cancel_reaches_the_running_handler_at_once_not_at_the_next_heartbeat(live_clock, tmp_path, told_by):
    result = gated.using(lease_ms=3_600_000).enqueue(str(tmp_path), 5)
    settings = {"TASK_MODULES": ["tests.testapp.more_tasks"], "HEARTBEAT_MS": 600_000, "NOTIFY": told_by == "NOTIFY"}
    with override_settings(BOSON=settings), ThreadWorker() as runner:
        started_file(tmp_path, result.id)
        wait_until(lambda: runner.worker.heartbeat.seconds_left() > 60, what="no heartbeat due for minutes")
        if told_by == "NOTIFY":
            wait_until(lambda: runner.worker.lifecycle.listener.connected.is_set(), what="LISTEN")
            runner.worker.lifecycle.forget_waker()  # as if it ran in another process: only the NOTIFY reaches it
            assert not wakeups._local
        assert services.cancel(result.id) is True
        # gated returns once told to stop (it never got its go-ahead file)
        wait_until(lambda: (tmp_path / f"finished-{result.id}").exists(), what="the handler to be told")
        wait_until(lambda: not runner.worker.slots.running, what="the worker to let it go")
    assert state(result.id) == "cancelled"
    assert services.get_result(result.id) is None


def test_a_sweep_that_made_jobs_available_wakes_the_other_workers_of_its_process(live_clock):
    due = add.using(run_after=live_clock.now() + timedelta(seconds=5)).enqueue(3, 4)
    with idle_worker(NOTIFY=False) as runner:
        assert state(due.id) == "scheduled"
        live_clock.advance(5_000)
        runner.worker.sweeper.release()  # its duties free: another worker of this process takes them
        sweeping = Worker(WorkerOptions(worker_id="sweeper", handle_signals=False))  # another worker's tick
        assert sweeping.sweeper.run()["boson.promote"] == 1  # it promotes the job and tells the others
        wait_until(lambda: state(due.id) == "completed", what="the idle worker to be woken")
        assert runner.worker.sweeper.seconds_left() > 0  # it did not sweep or poll itself
