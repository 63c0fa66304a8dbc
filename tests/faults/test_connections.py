"""PostgreSQL connections dropped under a worker: ``pg_terminate_backend`` while its ack
waits for the job row and while its renew does, and a server restart with jobs in flight.

The lease lives in the job row, not in a session lock, so a dropped connection frees
nothing (GoodJob ran a job twice when its advisory lock went with the connection): no
other worker can claim the job, the worker reconnects, renews and acks once.
"""

from __future__ import annotations

import re
import signal
import subprocess
from contextlib import contextmanager
from datetime import datetime

import pytest
from django.db import connection, connections
from psycopg import sql

from boson_django import services
from boson_django.models import Job
from boson_django.worker.notify import connect_params
from tests.faults.checker import assert_sound, effects_of, starts_of
from tests.faults.support import enqueue_many, wait_file, wait_until
from tests.worker.conftest import ACK_FLUSH, LOCKING_ACK, RowLock, waiting_backend
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

pytestmark = pytest.mark.postgres
EFFECT = "tests.testapp.fault_tasks.effect"


def _terminate(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def _kill_the_ack_waiting_for_its_row(job_id: str, tmp_path, what: str, ack: str = LOCKING_ACK) -> None:
    """Hold the job's row, let its handler return, and kill the connection of the ack that
    waits for the row (its query LIKE ``ack``); then let the row go."""
    lock = RowLock(job_id)
    try:
        (tmp_path / "go").write_text("go")
        _terminate(wait_until(lambda: waiting_backend(ack), what=what))
    finally:
        lock.release()


def test_connection_killed_mid_ack_the_ack_is_retried_and_the_effect_lands_once(live_clock, tmp_path, workers):
    (job_id,) = enqueue_many(EFFECT, 1, args=[str(tmp_path), "go", "", 3])
    worker = workers("w-mid-ack")
    wait_file(tmp_path, f"started-{job_id}-1")
    # A single ack is ack_many of one: its plain success goes as the flush's statement.
    _kill_the_ack_waiting_for_its_row(job_id, tmp_path, "the ack to wait for the row", ACK_FLUSH)
    wait_until(lambda: services.job_state(job_id)[1] == "completed", what="the retried ack")
    assert worker.says("database error; reconnecting"), worker.text()
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    job = Job.objects.get(id=job_id)
    assert (job.fence, job.attempt, job.crash_attempt) == (1, 1, 0)
    assert effects_of(job_id) == [1] and services.get_result(job_id).data == 3
    assert_sound([job_id])


def test_connection_killed_under_the_ack_flush_hands_the_acks_back_and_they_land_once(live_clock, tmp_path, workers):
    """The flush runs on the worker's ack thread with a connection of its own; killing that
    connection while it waits for a job row must not lose or double the ack."""
    (job_id,) = enqueue_many("tests.testapp.fault_tasks.gated", 1, args=[str(tmp_path), "go", 7])
    worker = workers("w-flush")
    wait_file(tmp_path, f"started-{job_id}-1")
    _kill_the_ack_waiting_for_its_row(job_id, tmp_path, "the flush to wait for the row", ACK_FLUSH)
    wait_until(lambda: services.job_state(job_id)[1] == "completed", what="the flushed-again ack")
    assert worker.says("flushing 1 acks failed; they are retried"), worker.text()
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    job = Job.objects.get(id=job_id)
    assert (job.fence, job.attempt, job.crash_attempt) == (1, 1, 0)
    assert starts_of(job_id) == [1] and services.get_result(job_id).data == 7
    assert_sound([job_id])


def test_connection_killed_mid_renew_frees_nothing_and_the_lease_holds(live_clock, tmp_path, workers):
    (job_id,) = enqueue_many(EFFECT, 1, args=[str(tmp_path), "go"], lease_ms=3_000)  # renewed every second
    worker = workers("w-mid-renew")
    wait_file(tmp_path, f"started-{job_id}-1")
    lock = RowLock(job_id)
    try:
        pid = wait_until(lambda: waiting_backend("UPDATE boson_job SET lease_expires_at%"), what="a renew to wait")
        _terminate(pid)
    finally:
        lock.release()
    worker.wait_for_line("database error; reconnecting")
    other = workers("w-other", "--burst")  # the job is still leased: nothing for it to take
    assert other.exit_code() == 0, other.text()
    assert starts_of(job_id) == [1] and Job.objects.get(id=job_id).lease_holder == "w-mid-renew"
    (tmp_path / "go").write_text("go")
    wait_until(lambda: services.job_state(job_id)[1] == "completed", what="the job to finish")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    job = Job.objects.get(id=job_id)
    assert (job.fence, job.attempt, job.crash_attempt) == (1, 1, 0) and effects_of(job_id) == [1]
    assert_sound([job_id])


@contextmanager
def _outage():
    """The store refuses every connection (``ALLOW_CONNECTIONS false``, set from the
    server's ``postgres`` database) and the workers' connections are killed, this test's
    own kept; until the block ends."""
    import psycopg

    name = connection.settings_dict["NAME"]
    admin = psycopg.connect(**connect_params({**connection.settings_dict, "NAME": "postgres"}), autocommit=True)
    try:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name)))
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> %s",
                      [name, connection.connection.info.backend_pid])
        yield
    finally:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(name)))
        admin.close()


def _backoffs(text: str) -> list[tuple[datetime, float, int]]:
    """When the worker said it would reconnect, in how many seconds, and which attempt failed."""
    found = re.findall(r"^(\S+ \S+) WARNING boson: database error; reconnecting in ([0-9.]+)s \(attempt (\d+):", text, re.M)
    return [(datetime.strptime(at, "%Y-%m-%d %H:%M:%S,%f"), float(wait), int(n)) for at, wait, n in found]


def test_an_outage_with_acks_pending_is_waited_out_with_backoff_not_a_busy_loop(live_clock, tmp_path, workers):
    """Each failed flush woke the loop, which cut its backoff short and tried again at
    once: ~180 reconnects (and two warnings with tracebacks each) a second of outage."""
    ids = enqueue_many("tests.testapp.fault_tasks.gated", 4, args=[str(tmp_path), "go", 5])
    worker = workers("w-outage", "--concurrency", "4")
    for job_id in ids:
        wait_file(tmp_path, f"started-{job_id}-1")
    with _outage():
        connection.ensure_connection()
        (tmp_path / "go").write_text("go")  # the handlers return: their acks meet the outage
        wait_until(lambda: [n for _, _, n in _backoffs(worker.text())][-1:] == [4], what="the loop's fourth attempt")
    wait_until(lambda: all(services.job_state(i)[1] == "completed" for i in ids), what="the acks after the outage")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    waits = _backoffs(worker.text())
    assert [n for _, _, n in waits[:4]] == [1, 2, 3, 4], worker.text()
    for _, wait, n in waits[:4]:  # doubling from 0.1 s, jittered down to half (30 s leases: no bound)
        assert 0.05 * 2 ** (n - 1) - 0.01 <= wait <= 0.1 * 2 ** (n - 1) + 0.01, worker.text()
    for (at, wait, _), (next_at, _, _) in zip(waits, waits[1:4]):
        assert (next_at - at).total_seconds() >= wait * 0.9, worker.text()  # each wait was waited out
    assert worker.text().count("acks failed") <= len(waits) + len(ids), worker.text()
    for job_id in ids:
        job = Job.objects.get(id=job_id)
        assert (job.fence, job.attempt, job.crash_attempt) == (1, 1, 0) and starts_of(job_id) == [1]
    assert_sound(ids)


def test_a_worker_stopped_after_its_connection_died_still_releases_its_jobs(live_clock, tmp_path, workers):
    """The loop's connection killed while it slept, then SIGTERM with no grace: the release
    met the dead connection and the worker exited at once, the job left running until
    its lease lapsed -- a crash instead of a release."""
    (job_id,) = enqueue_many("tests.testapp.fault_tasks.gated", 1, args=[str(tmp_path), "go"])
    worker = workers("w-dead-conn", "--grace-seconds", "0", "--no-notify")
    wait_file(tmp_path, f"started-{job_id}-1")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    job = Job.objects.get(id=job_id)
    assert (job.state, job.attempt, job.crash_attempt) == ("available", 0, 0), worker.text()
    assert [r.outcome for r in services.errors(job_id)] == ["released"]
    (tmp_path / "go").write_text("go")
    assert_sound([job_id])


PG_CTL = ["pg_ctlcluster", "--skip-systemctl-redirect", "15", "main"]


def _server_up() -> None:
    """Make sure the shared server is running again (also when the test failed)."""
    if subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode != 0:
        subprocess.run([*PG_CTL, "start"], check=False, capture_output=True)
    for _ in range(600):
        if subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode == 0:
            return
        subprocess.run(["sleep", "0.1"], check=False)
    raise AssertionError("PostgreSQL did not come back")


@pytest.mark.pg_restart
@pytest.mark.slow
def test_a_postgresql_restart_with_jobs_in_flight(live_clock, tmp_path, workers):
    held = enqueue_many(EFFECT, 12, args=[str(tmp_path), "go"])
    waiting = enqueue_many(EFFECT, 12)
    pool = [workers(f"w-restart-{i}", "--concurrency", "6") for i in range(2)]
    for job_id in held:
        wait_file(tmp_path, f"started-{job_id}-1")
    try:
        restarted = subprocess.run([*PG_CTL, "restart"], capture_output=True, text=True, timeout=120)
        assert restarted.returncode == 0, restarted.stderr
    finally:
        _server_up()
    connections.close_all()
    (tmp_path / "go").write_text("go")
    wait_until(lambda: services.counts().get("completed") == 24, timeout=120, what="every job after the restart")
    for worker in pool:
        worker.signal(signal.SIGTERM)
        assert worker.exit_code() == 0, worker.text()
    assert any(w.says("database error; reconnecting") for w in pool)
    for job_id in held + waiting:
        assert len(effects_of(job_id)) == 1
    assert all(Job.objects.get(id=j).crash_attempt == 0 for j in held)  # no lease lapsed: no crash counted
    assert_sound(held + waiting)
