"""The loop's machinery: NOTIFY wake-ups, heartbeats, duty-shared sweeps, reconnects,
embedded mode."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from boson_django import services
from boson_django.worker import embedded
from boson_django.worker.heartbeat import Heartbeat
from boson_django.worker.runtime import WorkerOptions
from boson_django.worker.sweeper import Sweeper
from tests.testapp.tasks import add, gated, state_of
from tests.worker.conftest import (
    ACK_FLUSH, Idle, ThreadWorker, ack_held, burst, idle_worker, job, started_file, state, wait_until, waiting_backend,
)



@pytest.mark.postgres
def test_notify_wakes_an_idle_worker_that_would_not_poll_for_minutes(live_clock):
    with idle_worker() as runner:
        assert runner.worker.lifecycle.listener is not None
        result = add.enqueue(4, 5)
        wait_until(lambda: state(result.id) == "completed", what="the NOTIFY wake-up")
    assert add.get_result(result.id).return_value == 9


def test_heartbeat_keeps_renewing_a_long_job(live_clock, tmp_path):
    result = gated.using(lease_ms=300).enqueue(str(tmp_path), 1)
    with ThreadWorker():
        started_file(tmp_path, result.id)
        for _ in range(3):  # 600 ms of store time pass: twice the lease, in steps
            renewed = live_clock.advance(200) + timedelta(milliseconds=300)
            wait_until(lambda at=renewed: job(result.id).lease_expires_at == at, what="a renewal")
        (tmp_path / "go").write_text("go")
        wait_until(lambda: state(result.id) == "completed", what="completion")
    assert job(result.id).crash_attempt == 0


def test_sweeps_are_shared_through_duties(live_clock):
    first, second = Sweeper("node-a", "default", 1_000, 100), Sweeper("node-b", "default", 1_000, 100)
    assert set(first.run().values()) == {0}
    assert set(second.run().values()) == {None}
    first.release()
    assert set(second.run().values()) == {0}


@pytest.mark.postgres
def test_worker_reconnects_after_its_connections_are_killed(live_clock):
    with ThreadWorker() as runner:
        assert state(add.enqueue(1, 1).id) is not None
        wait_until(lambda: services.counts()["completed"] == 1, what="a first job")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        result = add.enqueue(2, 2)
        wait_until(lambda: state(result.id) == "completed", what="a job after the reconnect")
        assert runner.thread.is_alive()


def test_embedded_worker_runs_jobs_in_a_thread(live_clock):
    worker = embedded.start(WorkerOptions(poll_interval_ms=20))
    try:
        assert embedded.start() is worker  # once per process
        result = add.enqueue(3, 3)
        wait_until(lambda: state(result.id) == "completed", what="the embedded worker")
    finally:
        embedded.stop()
    assert add.get_result(result.id).return_value == 6


@pytest.mark.parametrize(
    ("argv", "setting", "expected"),
    [
        (["manage.py", "migrate"], True, False),
        (["manage.py", "runserver"], True, False),  # the reloader's parent
        (["manage.py", "runserver", "--noreload"], True, True),  # no reloader: it serves itself
        (["manage.py", "runserver", "0.0.0.0:8000", "--noreload"], False, False),
        (["gunicorn", "app.wsgi"], True, True),
        (["gunicorn", "app.wsgi"], False, False),
    ],
)
def test_embedded_autostart_only_in_web_processes(monkeypatch, argv, setting, expected):
    monkeypatch.setattr("sys.argv", argv)
    monkeypatch.delenv("RUN_MAIN", raising=False)
    with override_settings(BOSON={"EMBEDDED_WORKER": setting}):
        assert embedded.should_autostart() is expected


@pytest.mark.postgres
def test_a_job_claimed_into_a_slot_whose_ack_is_in_flight_starts_once_that_ack_lands(live_clock, tmp_path):
    """A job started while the previous ack is still in flight could kill the process (a
    poison job) before that ack commits: the finished job would be re-run as a crash. The
    claim into that slot overlaps the flush; the start waits for its commit."""
    first = gated.enqueue(str(tmp_path), 1)
    second = state_of.enqueue(first.id)  # waits: one slot
    with ThreadWorker(concurrency=1):
        with ack_held(tmp_path, first.id):
            wait_until(lambda: (tmp_path / f"finished-{first.id}").exists(), what="the first handler to return")
            wait_until(lambda: waiting_backend(ACK_FLUSH), what="the ack flush to wait for the row")
            wait_until(lambda: state(second.id) == "running", what="the second job claimed while the ack waits")
            assert state(first.id) == "running"  # its ack still waits
        wait_until(lambda: state(second.id) == "completed", what="the second job")
    # When the second job's handler started, the first job's ack had committed.
    assert state_of.get_result(second.id).return_value == "completed"


@pytest.mark.postgres
def test_jobs_claimed_together_into_slots_whose_acks_are_in_flight_all_start_once_those_acks_land(live_clock, tmp_path):
    firsts = [gated.enqueue(str(tmp_path), n) for n in (1, 2)]
    with ThreadWorker(concurrency=2):
        with ack_held(tmp_path, *(first.id for first in firsts)):
            # Both handlers return before the next jobs exist, so one claim takes both
            # slots: enqueued earlier, a job could take the slot of whichever first job
            # returned first, and would rightly start when that one's ack landed.
            wait_until(lambda: all((tmp_path / f"finished-{first.id}").exists() for first in firsts),
                       what="both first handlers to return")
            seconds = [state_of.enqueue(first.id) for first in firsts]
            wait_until(lambda: all(state(second.id) == "running" for second in seconds),
                       what="both jobs claimed while the acks wait")
            assert [state(first.id) for first in firsts] == ["running", "running"]  # their acks still wait
        wait_until(lambda: all(state(second.id) == "completed" for second in seconds), what="both jobs")
    # When each started, the ack of the job whose slot it took had committed.
    assert [state_of.get_result(second.id).return_value for second in seconds] == ["completed", "completed"]


@pytest.mark.postgres
def test_a_job_cancelled_while_it_waits_for_its_slot_never_starts(live_clock, tmp_path):
    first = gated.enqueue(str(tmp_path), 1)
    second = gated.enqueue(str(tmp_path), 2)  # says when it starts: a file
    third = add.enqueue(1, 2)
    with ThreadWorker(concurrency=1) as runner:
        with ack_held(tmp_path, first.id):  # the second job cannot start
            wait_until(lambda: state(second.id) == "running", what="the second job claimed while the ack waits")
            assert services.cancel(second.id)
            gated_ = runner.worker.slots.gated
            wait_until(lambda: gated_ and gated_[0][0].settled, what="the worker to learn of the cancel")
        wait_until(lambda: state(third.id) == "completed", what="the third job, in the slot")
        assert not runner.worker.slots.gated and second.id not in runner.worker.slots.running
    assert state(second.id) == "cancelled"
    assert (tmp_path / f"started-{first.id}-1").exists()
    assert not list(tmp_path.glob(f"started-{second.id}-*"))  # its handler never ran


@pytest.mark.postgres
def test_a_stopping_worker_hands_back_a_job_waiting_for_its_slot_without_starting_it(live_clock, tmp_path):
    first = gated.enqueue(str(tmp_path), 1)
    second = gated.enqueue(str(tmp_path), 2)  # says when it starts: a file
    runner = ThreadWorker(concurrency=1, grace_ms=60_000).__enter__()  # not handed back for want of grace
    try:
        with ack_held(tmp_path, first.id):  # the second job cannot start
            wait_until(lambda: state(second.id) == "running", what="the second job claimed while the ack waits")
            runner.worker.stop()
            wait_until(lambda: state(second.id) == "available", what="the second job handed back")
    finally:
        assert runner.stop() == 0
    assert state(first.id) == "completed"
    assert job(second.id).attempt == 0 and job(second.id).runs.get().outcome == "released"
    assert not list(tmp_path.glob(f"started-{second.id}-*"))  # its handler never ran


def test_a_large_worker_claims_only_into_slots_whose_acks_have_landed():
    from boson_django.worker.runtime import Worker

    assert Worker(WorkerOptions(concurrency=64)).slots.borrows is (connection.vendor == "postgresql")
    assert not Worker(WorkerOptions(concurrency=65)).slots.borrows  # admits a quarter at a time already


@pytest.mark.postgres
def test_the_loop_claims_with_its_session_setting_and_gives_the_connection_back(live_clock, monkeypatch):
    from boson_django.drivers.postgresql import session

    seen: list[bool] = []
    real = session._session_settings
    monkeypatch.setattr(session, "_session_settings", lambda conn, planner: seen.append(real(conn, planner)) or seen[-1])
    results = [add.enqueue(1, n) for n in range(3)]

    burst()  # the worker's loop runs on this thread, with this thread's connection

    assert [state(r.id) for r in results] == ["completed"] * 3
    assert seen and all(seen), seen  # every claim ran alone, the setting held for the session
    assert not getattr(connection, "boson_dedicated", False)
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_bitmapscan")
        assert cursor.fetchone()[0] == "on"  # reset on the way out


@pytest.mark.parametrize(("concurrency", "batch"), [(1, 1), (10, 10), (64, 64), (100, 64), (256, 64), (300, 75), (512, 128), (1024, 256), (4096, 256)])
def test_a_tick_admits_a_quarter_of_a_large_workers_slots_and_all_of_a_small_ones(concurrency, batch):
    from boson_django.worker.runtime import admission_batch

    assert admission_batch(concurrency) == batch


def test_a_large_worker_admits_in_batches_and_still_fills_its_slots(live_clock, monkeypatch):
    asked: list[int] = []
    real = services.admit
    monkeypatch.setattr(services, "admit", lambda *a, **k: asked.append(a[2]) or real(*a, **k))
    results = services.enqueue([services.Envelope(task="tests.testapp.tasks.add", args=[1, n]) for n in range(200)])

    burst("--concurrency", "300")

    assert all(state(r.id) == "completed" for r in results)
    assert max(asked) == 75 and asked[0] == 75  # never the 300 free slots in one claim
    assert len([n for n in asked if n == 75]) >= 3  # the tick goes straight on to the next batch


def _attempt(lease_ms: int, timeout_ms: int | None = None):
    from boson_django.services import AdmissionUnit, Envelope, LeaseRef
    from boson_django.worker.attempt import Attempt

    env = Envelope(task="t", id=f"j{lease_ms}-{timeout_ms}", lease_ms=lease_ms, timeout_ms=timeout_ms)
    unit = AdmissionUnit(LeaseRef(env.id, 1), env, 0, 0, None, timezone.now())
    return Attempt(unit, "w", "default")


def test_the_heartbeat_follows_the_shortest_lease_held_as_attempts_come_and_go():
    beat = Heartbeat(every_ms=10_000, using="default")
    short, long_ = _attempt(3_000), _attempt(60_000)
    assert beat.interval_s() == 10.0  # nothing held: the setting

    beat.hold(long_)
    beat.hold(short)
    beat.hold(short)
    assert beat.interval_s() == 1.0  # a third of the shortest lease
    beat.drop(short)
    assert beat.interval_s() == 1.0  # one 3 s lease is still held
    beat.drop(short)
    assert beat.interval_s() == 10.0 and dict(beat.lengths) == {60_000: 1}
    beat.drop(long_)
    assert not beat.lengths


def test_a_worker_lets_go_of_every_attempt_it_held(live_clock):
    from boson_django.worker.runtime import Worker

    results = [add.enqueue(1, n) for n in range(5)]
    services.enqueue([services.Envelope(task="tests.testapp.tasks.add", args=[2, n], timeout_ms=60_000) for n in range(5)])
    worker = Worker(WorkerOptions(concurrency=4, burst=True, handle_signals=False))

    worker.run()

    assert all(state(r.id) == "completed" for r in results)
    assert worker.admitted == 10
    assert not worker.slots.running and not worker.slots.timed and not worker.heartbeat.lengths


def test_a_stopped_worker_lets_go_of_the_attempts_of_a_flush_it_never_collected(live_clock):
    """The loop may exit once the ack thread has settled the last flush and before it
    collects it: the slots of that flush, and of any attempt still held, are freed on the
    way out all the same, so no attempt outlives the worker in a cycle with its future."""
    from boson_django.states import Outcome
    from boson_django.worker.outcomes import Finish
    from boson_django.worker.runtime import Worker

    worker = Worker(WorkerOptions(handle_signals=False))
    acked, held = _attempt(30_000), _attempt(60_000)
    for attempt in (acked, held):
        worker.slots.hold(attempt)
        attempt.future = object()  # stands for the future whose callback names the attempt
    acked.settled = True
    worker.acker._done.put((((acked, Finish(Outcome.SUCCESS)),), None))  # flushed, never collected

    worker.lifecycle.finish()

    assert not worker.slots.running and not worker.heartbeat.lengths
    assert acked.future is None and held.future is None


def test_an_attempt_holds_its_future_before_its_handler_can_end():
    """The acker's thread reads ``attempt.future`` as soon as the done-callback has run,
    and a pool thread may end the call before ``submit`` returns: the future must be in
    place before the call is queued. Here the queue runs each call as it is put, the
    earliest a pool thread could."""
    from boson_django.worker.executor import Executor
    from boson_django.worker.threads import DaemonPool
    from tests.testapp.tasks import noop

    class RunsAtOnce:
        def put(self, item) -> None:
            DaemonPool._call(*item)

    executor = Executor(1, "race")
    executor.pool.shutdown()
    executor.pool.calls = RunsAtOnce()
    attempt = _attempt(30_000)
    attempt.unit = attempt.unit._replace(envelope=services.Envelope(task=noop.module_path, id="j1"))
    seen: list[object] = []

    executor.submit(attempt, lambda future: seen.append((future, attempt.future)), {})

    assert len(seen) == 1 and seen[0][1] is seen[0][0], seen  # the callback saw the future in place


def test_a_bug_in_the_ackers_thread_stops_the_loop_instead_of_hanging_it():
    """The acker's thread takes the finished attempts itself: an error there (not a
    database error, which hands the batch back) is raised in the loop, which would
    otherwise wait forever for acks no one sends."""
    from boson_django.worker.acker import Acker
    from boson_django.worker.notify import Waker
    from boson_django.worker.slots import Slots

    waker = Waker()

    def take():
        raise RuntimeError("a bug in take")

    acker = Acker("default", Slots(1, Heartbeat(every_ms=10_000, using="default"), borrows=False), waker, inline=False)
    acker._take = take  # type: ignore[method-assign]
    acker.start()
    acker.kick()
    assert waker.wait(10)
    with pytest.raises(RuntimeError, match="a bug in take"):
        acker.collect()
    assert not acker.busy
    acker.stop(timeout_s=5)


def test_a_worker_whose_slots_are_all_taken_waits_instead_of_ticking_again(live_clock, tmp_path):
    """Admitting into the last free slot ends the tick: another would find no slot, and
    the handlers just started would wait for the GIL it holds (an idle worker's wake-up
    paid a whole tick before its job's handler ran). Another wake-up may still come (on
    PostgreSQL the enqueue's NOTIFY after the direct one): only what follows the
    admission at once is checked."""
    with idle_worker(CONCURRENCY=1) as runner:
        worker = runner.worker
        admit, wait = worker.admission.admit, worker.waker.wait
        steps: list[str] = []  # the loop's admissions and waits, from the first that got a job

        def counting_admit():
            asked, got = admit()
            if steps or got:
                steps.append(f"admitted {got}")
            return asked, got

        def noted_wait(timeout: float) -> bool:
            if steps:
                steps.append("waited")
            return wait(timeout)

        worker.admission.admit = counting_admit
        worker.waker.wait = noted_wait
        idle = Idle(runner)
        result = gated.enqueue(str(tmp_path), 1)
        started_file(tmp_path, result.id)
        wait_until(idle, what="the loop asleep again")
        assert steps[:2] == ["admitted 1", "waited"], steps
        (tmp_path / "go").write_text("")
        wait_until(lambda: state(result.id) == "completed", what="the gated job")


def test_an_attempt_with_in_ack_effects_is_acked_by_the_tick_that_takes_it(live_clock, tmp_path):
    """Such an attempt is set aside for the loop when the finished ones are taken (on
    SQLite by the loop's own tick): that tick delivers it, no later poll is needed."""
    from tests.testapp.fault_tasks import effect
    from tests.testapp.models import Effect

    with idle_worker():  # no poll for ten minutes; the next heartbeat in ten seconds
        result = effect.enqueue(str(tmp_path))
        wait_until(lambda: state(result.id) == "completed", timeout=5, what="the ack with its effect")
    assert Effect.objects.filter(job_id=result.id).count() == 1


def test_embedded_worker_starts_with_the_first_request_outside_tests(live_clock, monkeypatch):
    """Started with the first request the process serves: a process that only sets Django
    up (pytest, a script) serves none and runs no worker; the test client's requests,
    inside Django's test environment, start none either."""
    from django.core import mail
    from django.core.signals import request_started

    assert embedded.in_test_environment()  # pytest-django set it up
    embedded.start_with_first_request()
    try:
        request_started.send(sender=None)
        assert "worker" not in embedded._state, "a test client's request started a worker"
        monkeypatch.delattr(mail, "outbox")  # as in a web server's process
        request_started.send(sender=None)
        worker = embedded._state.get("worker")
        assert worker is not None
        result = add.enqueue(2, 5)
        wait_until(lambda: state(result.id) == "completed", what="the worker started by a request")
        request_started.send(sender=None)
        assert embedded._state.get("worker") is worker, "one worker per process"
        assert not request_started.disconnect(dispatch_uid="boson_django.worker.embedded.first_request")
    finally:
        request_started.disconnect(dispatch_uid="boson_django.worker.embedded.first_request")
        embedded.stop()


def test_a_process_that_only_sets_django_up_starts_no_worker(monkeypatch):
    """``pytest`` or a script: Django is set up (``AppConfig.ready``), no request served."""
    from django.apps import apps
    from django.core.signals import request_started

    monkeypatch.setattr("sys.argv", ["/venv/bin/pytest", "tests"])
    with override_settings(BOSON={"EMBEDDED_WORKER": True}):
        apps.get_app_config("boson_django").ready()
    try:
        assert "worker" not in embedded._state
    finally:
        assert request_started.disconnect(dispatch_uid="boson_django.worker.embedded.first_request")
        embedded.stop()


def test_a_job_cancelled_retried_and_claimed_again_while_its_old_handler_runs(live_clock, tmp_path):
    """The operator's "stuck job: cancel, retry": the same worker claims the job again
    while the first handler, which ignores the cancel, still runs. Both claims are held
    at once under one job id; the first's end must not drop the second (the worker died
    with a KeyError when the second ended, its renewals stopped before that)."""
    from boson_django import services
    from tests.testapp.tasks import waits_blind

    result = waits_blind.enqueue(str(tmp_path))
    with ThreadWorker(concurrency=4) as runner:
        wait_until(lambda: len(list(tmp_path.glob("started-*"))) == 1, what="the first claim")
        assert services.cancel(result.id) and services.retry(result.id)
        wait_until(lambda: len(list(tmp_path.glob("started-*"))) == 2, what="the second claim")
        (tmp_path / "go").write_text("go")
        wait_until(lambda: state(result.id) == "completed", what="the second claim's ack")
        after = add.enqueue(1, 1)
        wait_until(lambda: state(after.id) == "completed", what="a job after both ended")
        assert runner.thread.is_alive() and runner.exit_code is None
    assert job(result.id).crash_attempt == 0
