"""The network between a worker and PostgreSQL broken on purpose, through a TCP proxy
(tests/faults/proxy.py): outages shorter than a lease, repeated blips, a black hole, a
primary failover. The worker's connections all go through the proxy; the test's own do
not.

These scenarios are about real time -- an outage lasts seconds of the wall clock and a
lease lapses on the store's real clock -- so the store clock runs (unfrozen), leases are
a few seconds long, and the bounds are generous.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from django.db import connection

from boson_django import clock, services
from boson_django.models import Job
from tests.faults.checker import assert_sound, effects_of, starts_of
from tests.faults.support import enqueue_many, proxied_env, wait_file, wait_until
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

pytestmark = pytest.mark.postgres
EFFECT = "tests.testapp.fault_tasks.effect"
#: A lease renewed every 0.3 s (``HEARTBEAT_MS``): at least 5.7 s are left on it when an
#: outage starts. A reconnect backoff that doubles from 0.1 s tries at 3.1 s, then 6.3 s.
LEASE_MS = 6_000
FAST_BEAT = {"HEARTBEAT_MS": 300}
OUTAGE_S = 3.5


@pytest.fixture
def real_clock(transactional_db):
    clock.unfreeze()


def _outage(proxy, worker, seconds: float) -> None:
    """Connections refused and every open one dropped for ``seconds``; then back."""
    backs = worker.text().count("database back after")
    proxy.refuse()
    proxy.drop()
    try:
        worker.wait_for_line("database error; reconnecting")
        time.sleep(seconds)  # the outage itself: real time
    finally:
        proxy.resume()
    wait_until(lambda: worker.text().count("database back after") > backs, what="the worker to be back")


def _assert_ran_once(ids: list[str]) -> None:
    for job_id in ids:
        job = Job.objects.get(id=job_id)
        assert (job.state, job.fence, job.attempt, job.crash_attempt) == ("completed", 1, 1, 0), job_id
        assert starts_of(job_id) == [1] and effects_of(job_id) == [1]
    assert_sound(ids)


@pytest.mark.slow
def test_an_outage_shorter_than_the_leases_keeps_every_lease(real_clock, tmp_path, proxy, workers):
    ids = enqueue_many(EFFECT, 4, args=[str(tmp_path), "go"], lease_ms=LEASE_MS)
    worker = workers("w-short-outage", "--concurrency", "4", env=proxied_env(proxy, **FAST_BEAT))
    for job_id in ids:
        wait_file(tmp_path, f"started-{job_id}-1")
    _outage(proxy, worker, OUTAGE_S)
    (tmp_path / "go").write_text("go")
    wait_until(lambda: all(services.job_state(i)[1] == "completed" for i in ids), what="every job to complete")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    assert "was lost" not in worker.text(), worker.text()
    assert "4 leases renewed, 0 lost" in worker.text(), worker.text()
    _assert_ran_once(ids)


@pytest.mark.slow
def test_repeated_blips_quarantine_nothing(real_clock, tmp_path, proxy, workers):
    """Three outages, each shorter than the time left on the lease: a job that lost its
    lease at each would be quarantined (``CRASH_LIMIT`` 3), and its fingerprint with it."""
    ids = enqueue_many(EFFECT, 2, args=[str(tmp_path), "go"], lease_ms=LEASE_MS)
    worker = workers("w-blips", "--concurrency", "2", env=proxied_env(proxy, **FAST_BEAT))
    for job_id in ids:
        wait_file(tmp_path, f"started-{job_id}-1")
    for _ in range(3):
        _outage(proxy, worker, OUTAGE_S)
    (tmp_path / "go").write_text("go")
    wait_until(lambda: all(services.job_state(i)[1] == "completed" for i in ids), what="every job to complete")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    assert worker.text().count("2 leases renewed, 0 lost") == 3, worker.text()
    assert services.counts()["quarantined"] == 0
    _assert_ran_once(ids)


#: Black-hole scenarios: 10 s leases (a renewal unanswered for half the time left, ~5 s,
#: is given up), connect attempts given up after 2 s (libpq's least).
LONG_LEASE_MS = 10_000
QUICK_CONNECT = {**FAST_BEAT, "CONNECTION_OPTIONS": {"connect_timeout": 2}}


@pytest.mark.slow
def test_a_black_hole_is_noticed_and_the_worker_recovers_without_a_restart(real_clock, tmp_path, proxy, workers):
    """Every packet dropped without a word: the connections stay open and nothing on them
    fails, so only an answer that is overdue says the database is gone. The worker drops
    its connection, reconnects once the path is back and renews before its leases lapse."""
    ids = enqueue_many(EFFECT, 2, args=[str(tmp_path), "go"], lease_ms=LONG_LEASE_MS)
    worker = workers("w-hole", "--concurrency", "2", env=proxied_env(proxy, **QUICK_CONNECT))
    for job_id in ids:
        wait_file(tmp_path, f"started-{job_id}-1")
    proxy.black_hole()
    try:
        worker.wait_for_line("no answer from the database after")
        worker.wait_for_line("database error; reconnecting")  # a new connection is not answered either
    finally:
        proxy.resume()
    worker.wait_for_line("database back after")
    (tmp_path / "go").write_text("go")
    wait_until(lambda: all(services.job_state(i)[1] == "completed" for i in ids), what="every job to complete")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    assert "was lost" not in worker.text() and "2 leases renewed, 0 lost" in worker.text(), worker.text()
    _assert_ran_once(ids)


@pytest.mark.slow
@pytest.mark.parametrize("second", [None, signal.SIGINT], ids=["sigterm", "then-sigint"])
def test_a_black_hole_then_sigterm_exits_in_time(real_clock, tmp_path, proxy, workers, second):
    """SIGTERM with every packet black-holed: the worker exits within its grace and a few
    seconds (its calls in flight are dropped when the grace ends); a second signal ends
    it at once, however long the grace."""
    ids = enqueue_many(EFFECT, 2, args=[str(tmp_path), "go"], lease_ms=LONG_LEASE_MS)
    grace = "2" if second is None else "600"
    worker = workers("w-hole-term", "--concurrency", "2", "--grace-seconds", grace, env=proxied_env(proxy, **QUICK_CONNECT))
    for job_id in ids:
        wait_file(tmp_path, f"started-{job_id}-1")
    proxy.black_hole()
    time.sleep(1.0)  # the worker's next calls go unanswered
    began = time.monotonic()
    worker.signal(signal.SIGTERM)
    if second is not None:
        time.sleep(0.5)  # the first signal heard: its grace is ten minutes
        began = time.monotonic()
        worker.signal(second)
    assert worker.exit_code(timeout=60) == 0, worker.text()
    took = time.monotonic() - began
    allowed = 2 + 8 if second is None else 8  # the grace, a connect timeout, the allowance, the exit: generous
    assert took < allowed, f"exited {took:.1f}s after the signal\n{worker.text()}"
    proxy.resume()
    (tmp_path / "go").write_text("go")
    assert_sound(ids)  # still running under their leases: nothing stranded, nothing doubled


#: A failover: 20 s leases outlast the 10 s the new primary takes to accept connections.
FAILOVER_LEASE_MS = 20_000
FAILOVER_S = 10.0


def _kill_every_backend() -> int:
    """``pg_terminate_backend`` of every session of the test database but this test's own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.mark.slow
def test_a_primary_failover_loses_nothing_and_runs_nothing_twice(real_clock, tmp_path, proxy, workers):
    """Every backend killed, connections refused for 10 s, then accepted again -- what
    clients see of a primary failing over to a standby. The jobs that were running keep
    their leases and finish once; the jobs that were waiting run once, after."""
    held = enqueue_many(EFFECT, 4, args=[str(tmp_path), "go"], lease_ms=FAILOVER_LEASE_MS)
    waiting = enqueue_many(EFFECT, 6, lease_ms=FAILOVER_LEASE_MS)
    pool = [workers(f"w-failover-{i}", "--concurrency", "2", env=proxied_env(proxy, **QUICK_CONNECT)) for i in range(2)]
    for job_id in held:
        wait_file(tmp_path, f"started-{job_id}-1")
    proxy.refuse()
    try:
        assert _kill_every_backend() >= 4  # each worker's loop, ack thread and LISTEN connection at least
        for worker in pool:
            worker.wait_for_line("database error; reconnecting")
        time.sleep(FAILOVER_S)  # the standby being promoted: real time
    finally:
        proxy.resume()
    for worker in pool:
        worker.wait_for_line("database back after")
    (tmp_path / "go").write_text("go")
    wait_until(lambda: services.counts().get("completed") == 10, timeout=60, what="every job to complete")
    for worker in pool:
        worker.signal(signal.SIGTERM)
        assert worker.exit_code() == 0, worker.text()
        assert "was lost" not in worker.text(), worker.text()
    _assert_ran_once(held + waiting)


def test_an_outage_logs_one_line_per_attempt_one_traceback_and_when_it_ended(real_clock, tmp_path, proxy, workers):
    """Every attempt logged a traceback of ~78 lines (700 lines for a 43 s outage), and
    nothing said when the database was back."""
    (job_id,) = enqueue_many(EFFECT, 1, args=[str(tmp_path), "go"], lease_ms=LEASE_MS)
    worker = workers("w-log", env=proxied_env(proxy, **FAST_BEAT))
    wait_file(tmp_path, f"started-{job_id}-1")
    began = time.monotonic()
    proxy.refuse()
    proxy.drop()
    try:
        worker.wait_for_line("database error; reconnecting")
        (tmp_path / "go").write_text("go")  # its ack meets the outage too
        wait_until(lambda: worker.text().count("database error; reconnecting") >= 6, what="six attempts")
    finally:
        proxy.resume()
    worker.wait_for_line("database back after")
    outage_s = time.monotonic() - began
    wait_until(lambda: services.job_state(job_id)[1] == "completed", what="the job")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    text = worker.text()
    attempts = re.findall(r"database error; reconnecting in ([0-9.]+)s \(attempt (\d+): (\w+): (.+)\)$", text, re.M)
    assert [int(n) for _, n, _, _ in attempts] == list(range(1, len(attempts) + 1)), text
    assert all(kind in ("OperationalError", "DatabaseError") and message for _, _, kind, message in attempts), text
    traced = re.findall(r"^\S+ \S+ WARNING boson: (.*)\nTraceback", text, re.M)  # a record and its traceback
    assert len(traced) == 1 and "(attempt 1:" in traced[0], text
    back = re.search(r"database back after ([0-9.]+)s \((\d+) failed attempts\); 1 leases renewed, 0 lost", text)
    assert back and int(back.group(2)) == len(attempts), text
    assert 0.5 <= float(back.group(1)) <= outage_s + 1, (back.group(0), outage_s)
    _assert_ran_once([job_id])
