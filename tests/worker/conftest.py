"""Worker tests run jobs on other threads and processes, so the store must be committed:
they use ``live_clock`` (transactional database, store clock frozen at 2030-01-01)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management import call_command
from django.test import override_settings

from boson_django import services


def burst(*args: str) -> None:
    """``manage.py boson_worker --burst`` in this process."""
    call_command("boson_worker", "--burst", "--concurrency", "2", *args)


def state(job_id: str) -> str | None:
    found = services.job_state(job_id)
    return None if found is None else found[1]


def job(job_id: str) -> Any:
    from boson_django.models import Job

    return Job.objects.get(id=job_id)


import os  # noqa: E402
import pathlib  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from boson_django.worker import Worker, WorkerOptions  # noqa: E402


def wait_until(check: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``check()`` until it is truthy (coordination, not timing: the bound only
    turns a hang into a failure)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def started_file(folder: pathlib.Path, job_id: str) -> Any:
    return wait_until(lambda: list(folder.glob(f"started-{job_id}-*")) or list(folder.glob(f"started-{job_id}")),
                      what=f"job {job_id} to start")


class ThreadWorker:
    """A real Worker on a thread of this process (no signals: stop() instead)."""

    def __init__(self, **options: Any):
        options.setdefault("poll_interval_ms", 20)
        options.setdefault("grace_ms", 2_000)
        self.worker = Worker(WorkerOptions(handle_signals=False, **options))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.exit_code: int | None = None

    def _run(self) -> None:
        from django.db import connections

        try:
            self.exit_code = self.worker.run()
        finally:
            connections.close_all()

    def __enter__(self) -> ThreadWorker:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self, timeout: float = 20.0) -> int | None:
        self.worker.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "worker did not stop"
        return self.exit_code


class Idle:
    """Watches a worker's loop for the moment only a wake-up (or its next poll) can start
    a job.

    ``__call__`` is true once the LISTEN connection is up (if the worker listens), the
    loop sleeps on its waker and no wake-up is pending: from then on a job the worker
    starts before its poll is due was started by a notification, not by a wake-up left
    over from start-up (the listener sets the waker when it connects). Install before
    the worker starts.
    """

    def __init__(self, runner: ThreadWorker):
        self.worker = runner.worker
        self.sleeping = threading.Event()
        wait = self.worker.waker.wait

        def watched(timeout: float) -> bool:
            self.sleeping.set()
            try:
                return wait(timeout)
            finally:
                self.sleeping.clear()

        self.worker.waker.wait = watched  # type: ignore[method-assign]

    def __call__(self) -> bool:
        listener = self.worker.lifecycle.listener
        connected = listener is None or listener.connected.is_set()
        return connected and self.sleeping.is_set() and not self.worker.waker._event.is_set()


@contextmanager
def idle_worker(**settings: Any) -> Iterator[ThreadWorker]:
    """A worker that would not poll or sweep for ten minutes, handed over once it sleeps
    (:class:`Idle`): only a wake-up can start a job in it. ``settings``: more ``BOSON``."""
    boson = {"TASK_MODULES": ["tests.testapp.more_tasks"], "POLL_INTERVAL_MS": 600_000,
             "SWEEP_INTERVAL_MS": 600_000, **settings}
    with override_settings(BOSON=boson):
        runner = ThreadWorker(poll_interval_ms=600_000)
        idle = Idle(runner)
        with runner:
            wait_until(idle, what="an idle worker")
            assert runner.worker.sweeper.seconds_left() > 0  # its sweeps are not due for minutes
            yield runner


@pytest.fixture
def folder(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path


class RowLock:
    """Holds ``FOR UPDATE`` on one job row from a PostgreSQL connection of its own."""

    def __init__(self, job_id: str):
        import psycopg
        from django.db import connection

        s = connection.settings_dict
        self.conn = psycopg.connect(dbname=s["NAME"], user=s["USER"], host=s["HOST"], port=s["PORT"], password=s["PASSWORD"])
        self.conn.execute("SELECT id FROM boson_job WHERE id = %s FOR UPDATE", [job_id])

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


@contextmanager
def ack_held(folder: pathlib.Path, *job_ids: str) -> Iterator[None]:
    """Lets the ``gated`` jobs ``job_ids`` (started, one slot each) return while their
    acks wait on row locks held to the end of the block: jobs claimed meanwhile into
    their slots wait there to be started."""
    for job_id in job_ids:
        started_file(folder, job_id)
    holders = [RowLock(job_id) for job_id in job_ids]
    try:
        (folder / "go").write_text("go")
        yield
    finally:
        for holder in holders:
            holder.release()


#: The query of an ack flush (``drivers.postgresql.acks``), for :func:`waiting_backend`.
ACK_FLUSH = "%UPDATE boson_job j SET state = 'completed'%"
#: A fenced write of the general path, which locks the job row first.
LOCKING_ACK = "%boson_job%FOR UPDATE%"


def waiting_backend(pattern: str) -> int | None:
    """The pid of a backend of this database waiting for a lock in a query LIKE ``pattern``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND wait_event_type = 'Lock' AND query LIKE %s", [pattern],
        )
        row = cursor.fetchone()
    return row[0] if row else None


ROOT = pathlib.Path(__file__).resolve().parents[2]


class Proc:
    """A worker subprocess (``python -m django boson_worker``) whose log goes to a file the
    test can wait on. It leads a process group of its own, so that the ``procs`` fixture
    also ends the children of a reloading worker."""

    def __init__(self, folder: pathlib.Path, name: str, *args: str, settings: str = "tests.settings",
                 path: pathlib.Path | None = None):
        from django.db import connection

        self.log = folder / f"{name}.log"
        env = dict(
            os.environ, DJANGO_SETTINGS_MODULE=settings, PYTHONPATH=os.pathsep.join(map(str, filter(None, (path, ROOT)))),
            BOSON_TEST_DB=os.environ.get("BOSON_TEST_DB", "sqlite"),
            BOSON_PG_NAME=str(connection.settings_dict["NAME"]),
        )
        command = [sys.executable, "-m", "django", "boson_worker", "--poll-interval-ms", "50", "--worker-id", name, *args]
        with open(self.log, "w") as out:
            self.popen = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)

    def text(self) -> str:
        return self.log.read_text()

    def says(self, text: str) -> bool:
        return text in self.text()

    def wait_for_line(self, text: str) -> None:
        wait_until(lambda: self.says(text) or self.popen.poll() is not None, what=f"{text!r} in {self.log.name}")
        assert self.says(text), self.text()

    def exit_code(self, timeout: float = 30) -> int:
        try:
            return self.popen.wait(timeout)
        finally:
            if self.popen.poll() is None:
                self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(10)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.kill()
