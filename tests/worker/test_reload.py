"""``boson_worker --reload``: a real reloading worker (parent and child processes) whose
settings module lives in the test's folder, so that the test can change a watched file."""

from __future__ import annotations

import os
import pathlib
import signal

import pytest

from tests.testapp.tasks import gated, noop
from tests.worker.conftest import Proc, job, started_file, state, wait_until

SETTINGS = "from tests.settings import *  # noqa: F403\n"


def reloading(folder: pathlib.Path, name: str, settings: str = SETTINGS) -> Proc:
    (folder / "reload_settings.py").write_text(settings)
    proc = Proc(folder, name, "--reload", "--grace-seconds", "60", settings="reload_settings", path=folder)
    proc.wait_for_line("watching for file changes")
    return proc


def change_until(path: pathlib.Path, proc: Proc, text: str, content: str | None = None) -> None:
    """Change ``path`` (its content, if given; its mtime, a second later each time) until
    ``proc`` logs ``text``: the reloader's first look at a file only notes its mtime."""
    if content is not None:
        path.write_text(content)
    stamp = [path.stat().st_mtime]

    def changed() -> bool:
        stamp[0] += 1
        os.utime(path, (stamp[0], stamp[0]))
        return proc.says(text) or proc.popen.poll() is not None

    wait_until(changed, what=f"{text!r} in {proc.log.name}")
    assert proc.says(text), proc.text()


@pytest.mark.slow
def test_a_change_restarts_the_worker_once_its_running_job_is_done(live_clock, tmp_path, procs):
    proc = reloading(tmp_path, "w-reload")
    procs.append(proc)
    running = gated.enqueue(str(tmp_path), 7)
    started_file(tmp_path, running.id)
    change_until(tmp_path / "reload_settings.py", proc, "reload_settings.py changed; the worker restarts once its running jobs are done")
    assert state(running.id) == "running"  # its handler waits for the go-ahead: no restart yet
    assert proc.text().count("worker w-reload up") == 1
    (tmp_path / "go").write_text("go")
    wait_until(lambda: proc.text().count("worker w-reload up") == 2, what="the worker to start again")
    finished = job(running.id)
    assert (finished.state, finished.attempt, finished.crash_attempt) == ("completed", 1, 0), proc.text()
    later = noop.enqueue()
    wait_until(lambda: state(later.id) == "completed", what="the restarted worker to run a job")
    proc.popen.send_signal(signal.SIGTERM)  # the parent passes it on: the child stops, then the parent
    assert proc.exit_code() == 0, proc.text()
    assert proc.text().count("worker w-reload stopped") == 2


@pytest.mark.parametrize("stop", ["SIGTERM to the parent", "Ctrl-C: SIGINT to the group"])
def test_a_stop_lets_the_running_job_finish_and_ends_both_processes(live_clock, tmp_path, procs, stop):
    """The child hears the stop once: a second signal would have released the job at once."""
    proc = reloading(tmp_path, "w-reload-term")
    procs.append(proc)
    running = gated.enqueue(str(tmp_path), 3)
    started_file(tmp_path, running.id)
    if stop.startswith("SIGTERM"):
        proc.popen.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.popen.pid, signal.SIGINT)
    proc.wait_for_line(f"stopping ({stop[stop.index('SIG'):].split()[0]})")
    (tmp_path / "go").write_text("go")
    assert proc.exit_code() == 0, proc.text()
    finished = job(running.id)
    assert (finished.state, finished.crash_attempt) == ("completed", 0)
    assert proc.text().count("worker w-reload-term up") == 1


@pytest.mark.slow
def test_a_worker_that_cannot_start_waits_for_the_fix(live_clock, tmp_path, procs):
    """A module of tasks with a syntax error fails the system check (boson.E005): the
    child keeps watching, and the fix starts the worker."""
    broken = tmp_path / "reload_tasks.py"
    broken.write_text("def oops(:\n")
    settings = SETTINGS + "BOSON = {**BOSON, 'TASK_MODULES': [*BOSON['TASK_MODULES'], 'reload_tasks']}\n"
    proc = reloading(tmp_path, "w-reload-broken", settings)
    procs.append(proc)
    proc.wait_for_line("boson.E005")
    assert "the worker cannot start; it starts again when a file changes" in proc.text()
    assert "worker w-reload-broken up" not in proc.text()
    change_until(broken, proc, "worker w-reload-broken up", content="VALUE = 1\n")
    later = noop.enqueue()
    wait_until(lambda: state(later.id) == "completed", what="the fixed worker to run a job")
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.exit_code() == 0, proc.text()
