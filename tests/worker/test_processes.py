"""Real worker processes (``python -m django boson_worker``): SIGKILL, SIGTERM, lost leases.

They run on SQLite and PostgreSQL alike. Processes and the test coordinate through files
and rows; time-dependent steps use the frozen store clock, which every process reads from
the database.
"""

from __future__ import annotations

import signal

import pytest

from boson_django import services
from boson_django.models import Run
from tests.testapp.tasks import async_waits_in_a_thread, gated, noop
from tests.worker.conftest import Proc, job, started_file, state, wait_until


def test_sigkill_mid_job_is_reclaimed_and_completed_exactly_once(live_clock, tmp_path, procs):
    result = gated.enqueue(str(tmp_path), 11)
    first = Proc(tmp_path, "w-killed")
    procs.append(first)
    started_file(tmp_path, result.id)
    first.popen.send_signal(signal.SIGKILL)
    assert first.exit_code() == -signal.SIGKILL
    assert state(result.id) == "running"
    live_clock.advance(job(result.id).lease_ms + 1)
    (tmp_path / "go").write_text("go")
    second = Proc(tmp_path, "w-rescuer", "--burst")
    procs.append(second)
    assert second.exit_code() == 0, second.log.read_text()
    after = job(result.id)
    assert (after.state, after.crash_attempt, after.attempt) == ("completed", 1, 1)
    assert services.get_result(result.id).data == 11 and services.get_result(result.id).fence == 2
    runs = list(Run.objects.filter(job_id=result.id).order_by("fence").values_list("worker_id", "outcome"))
    assert runs == [("w-killed", "lease_lost"), ("w-rescuer", "success")]
    assert (tmp_path / f"finished-{result.id}").read_text() == "11"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_drains_running_jobs_and_exits_zero(live_clock, tmp_path, procs, signum):
    """SIGHUP (a closed terminal) stops the worker as SIGTERM does, not as a crash."""
    jobs = [gated.enqueue(str(tmp_path), i) for i in range(3)]
    proc = Proc(tmp_path, "w-term", "--concurrency", "4", "--grace-seconds", "60")
    procs.append(proc)
    for each in jobs:
        started_file(tmp_path, each.id)
    proc.popen.send_signal(signum)
    proc.wait_for_line(f"stopping ({signal.Signals(signum).name})")
    late = noop.enqueue()  # admission has stopped: this one waits for another worker
    (tmp_path / "go").write_text("go")
    assert proc.exit_code() == 0, proc.log.read_text()
    assert [gated.get_result(j.id).return_value for j in jobs] == [0, 1, 2]
    assert state(late.id) == "available"
    assert services.counts()["running"] == 0


def test_second_sigterm_releases_running_jobs_at_once(live_clock, tmp_path, procs):
    result = gated.enqueue(str(tmp_path), 1)
    proc = Proc(tmp_path, "w-twice", "--grace-seconds", "600")
    procs.append(proc)
    started_file(tmp_path, result.id)
    proc.popen.send_signal(signal.SIGTERM)
    proc.wait_for_line("stopping (SIGTERM)")
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.exit_code() == 0, proc.log.read_text()
    after = job(result.id)
    assert (after.state, after.attempt, after.crash_attempt) == ("available", 0, 0)
    assert [r.outcome for r in services.errors(result.id)] == ["released"]


def test_a_lost_lease_cannot_store_the_result(live_clock, tmp_path, procs):
    result = gated.enqueue(str(tmp_path), 5)
    proc = Proc(tmp_path, "w-late")
    procs.append(proc)
    started_file(tmp_path, result.id)
    services.pause_queue("default")
    live_clock.advance(job(result.id).lease_ms + 1)
    (tmp_path / "go").write_text("go")
    proc.wait_for_line("not stored")
    assert services.get_result(result.id) is None
    services.reclaim_expired()
    assert (state(result.id), job(result.id).crash_attempt, job(result.id).attempt) == ("available", 1, 0)
    services.resume_queue("default")
    wait_until(lambda: state(result.id) == "completed", what="the job to run again")
    assert services.get_result(result.id).fence == 2
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.exit_code() == 0



def test_a_stopped_worker_exits_though_an_async_handler_is_stuck_in_sync_to_async(live_clock, tmp_path, procs):
    """asgiref runs ``sync_to_async`` calls on a ThreadPoolExecutor's thread, which the
    interpreter joins at exit: the worker released the job and said it stopped, and the
    process stayed, ignoring every further SIGTERM."""
    result = async_waits_in_a_thread.enqueue(str(tmp_path))
    proc = Proc(tmp_path, "w-straggler", "--grace-seconds", "0")
    procs.append(proc)
    wait_until(lambda: list(tmp_path.glob("started-*")), what="the handler to start")
    proc.popen.send_signal(signal.SIGTERM)
    assert proc.exit_code() == 0, proc.log.read_text()
    assert proc.says("did not exit within 2.0s of the worker stopping; exiting without the threads still running")
    assert state(result.id) == "available" and [r.outcome for r in services.errors(result.id)] == ["released"]
    (tmp_path / "go").write_text("go")


def test_a_burst_worker_exits_though_an_async_handler_past_its_timeout_is_stuck_in_sync_to_async(
        live_clock, tmp_path, procs):
    """The job is acked as timed out and the burst is done; the process still had asgiref's
    thread to join at exit, which never ended."""
    [created] = services.enqueue([services.Envelope(task=async_waits_in_a_thread.module_path, args=[str(tmp_path)],
                                                    timeout_ms=1_000, max_attempts=1)])
    proc = Proc(tmp_path, "w-burst-straggler", "--burst")
    procs.append(proc)
    wait_until(lambda: list(tmp_path.glob("started-*")), what="the handler to start")
    live_clock.advance(1_001)  # past timeout_ms on the store clock
    try:
        assert proc.exit_code() == 0, proc.text()
        assert proc.says("exiting without the threads still running")
        assert state(created.id) == "failed"
    finally:
        (tmp_path / "go").write_text("go")

