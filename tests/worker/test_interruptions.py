"""A running handler is told to stop: timeout, cancellation, lost lease, shutdown."""

from __future__ import annotations

from boson_django import services
from tests.testapp.tasks import async_ignores_cancel, gated, gated_steps, overruns, stamp, waits_blind
from tests.worker.conftest import Idle, ThreadWorker, job, started_file, state, wait_until


def test_timeout_is_acked_retry_and_the_handler_is_asked_to_stop(live_clock, folder):
    result = overruns.enqueue(str(folder))
    with ThreadWorker():
        started_file(folder, result.id)
        live_clock.advance(1_001)  # past timeout_ms on the store clock
        wait_until(lambda: state(result.id) == "retryable", what="the timeout ack")
        assert (wait_until(lambda: (folder / f"stopped-{result.id}").exists()))
    (record,) = services.errors(result.id)
    assert record.error.startswith("boson_django.worker.outcomes.TaskTimeout: handler overran timeout_ms=1000")
    assert any("started, will overrun" in line for line in record.logs)
    assert (folder / f"stopped-{result.id}").read_text() == "True"
    assert job(result.id).attempt == 1


def test_a_burst_worker_exits_though_a_timed_out_handler_never_returns(live_clock, folder):
    """The job is acked as timed out; its handler keeps a daemon thread, which neither the
    worker nor the process waits for. A burst worker waited for it forever."""
    [created] = services.enqueue([services.Envelope(task=waits_blind.module_path, args=[str(folder)], timeout_ms=1_000,
                                                    max_attempts=1)])
    runner = ThreadWorker(burst=True)
    runner.thread.start()
    try:
        wait_until(lambda: list(folder.glob("started-*")), what="the handler to start")
        live_clock.advance(1_001)  # past timeout_ms on the store clock
        wait_until(lambda: not runner.thread.is_alive(), what="the burst worker to exit")
        assert runner.exit_code == 0
        assert state(created.id) == "failed"
    finally:
        (folder / "go").write_text("go")  # the handler's thread ends too
        runner.thread.join(20)


def test_cancelled_job_stops_at_its_next_checkpoint_and_stores_nothing(live_clock, folder):
    result = gated_steps.enqueue(str(folder), 3)
    with ThreadWorker() as worker:
        started_file(folder, result.id)
        wait_until(lambda: (job(result.id).checkpoint or {}).get("step") == 2, what="two steps")
        assert services.cancel(result.id)
        worker.worker.heartbeat.last = 0  # the next tick renews now and learns of the loss
        wait_until(lambda: not worker.worker.slots.running or all(a.settled for a in worker.worker.slots.running.values()),
                   what="the worker to notice")
        (folder / "go").write_text("go")
        wait_until(lambda: not worker.worker.slots.running, what="the handler to return")
    assert state(result.id) == "cancelled"
    assert job(result.id).checkpoint == {"step": 2}  # step 3 was refused
    assert services.get_result(result.id) is None


def test_lost_lease_cannot_store_its_result(live_clock, folder):
    result = gated.enqueue(str(folder), 7)
    with ThreadWorker() as worker:
        started_file(folder, result.id)
        services.pause_queue("default")  # keep it from being re-admitted for now
        live_clock.advance(job(result.id).lease_ms + 1)
        services.reclaim_expired()  # (or the worker's own sweep got there first)
        assert (state(result.id), job(result.id).crash_attempt) == ("available", 1)
        (folder / "go").write_text("go")
        wait_until(lambda: (folder / f"finished-{result.id}").exists(), what="the handler to finish")
        wait_until(lambda: not worker.worker.slots.running, what="the worker to drop it")
        assert services.get_result(result.id) is None
        assert (state(result.id), job(result.id).attempt) == ("available", 0)
        services.resume_queue("default")
        wait_until(lambda: state(result.id) == "completed", what="the second claim to complete")
    stored = services.get_result(result.id)
    assert (stored.data, stored.fence, stored.attempt) == (7, 2, 1)


def test_stop_lets_running_jobs_finish_within_the_grace(live_clock, folder):
    result = gated.enqueue(str(folder), 3)
    runner = ThreadWorker(grace_ms=30_000).__enter__()
    started_file(folder, result.id)
    runner.worker.stop()
    wait_until(lambda: runner.worker.lifecycle.announced_stop, what="the worker to begin stopping")
    assert state(result.id) == "running"
    (folder / "go").write_text("go")
    runner.thread.join(20)
    assert runner.exit_code == 0
    assert gated.get_result(result.id).return_value == 3


def test_stop_releases_jobs_still_running_when_the_grace_ends(live_clock, folder):
    result = gated.enqueue(str(folder), 3)
    runner = ThreadWorker(grace_ms=0).__enter__()
    started_file(folder, result.id)
    assert runner.stop() == 0
    assert state(result.id) == "available"
    assert (job(result.id).attempt, job(result.id).crash_attempt) == (0, 0)
    assert [r.outcome for r in services.errors(result.id)] == ["released"]
    (folder / "go").write_text("go")  # the released handler ends; nothing acks it any more
    wait_until(lambda: (folder / f"finished-{result.id}").exists(), what="the released handler to end")
    assert services.get_result(result.id) is None and state(result.id) == "available"


def test_a_handler_returning_as_the_grace_ends_is_acked_not_released(live_clock, folder):
    """It returned after the tick's collect and before the grace's release: released, its
    finished job would have run again."""
    result = gated.enqueue(str(folder), 5)
    runner = ThreadWorker(grace_ms=0)
    worker, enforce = runner.worker, runner.worker._enforce_timeouts

    def handler_returns_between_collect_and_drain() -> None:
        if worker.shutdown.stopping:
            (folder / "go").write_text("go")
            wait_until(lambda: all(a.future is None or a.future.done() for a in worker.slots.running.values()),
                       what="the handler to return")
        enforce()

    worker._enforce_timeouts = handler_returns_between_collect_and_drain  # type: ignore[method-assign]
    with runner:
        started_file(folder, result.id)
        worker.stop()
        runner.thread.join(20)
    assert state(result.id) == "completed"
    assert [r.outcome for r in services.errors(result.id)] == []


def test_notify_free_worker_picks_up_new_jobs_by_polling(live_clock, folder):
    with ThreadWorker(notify=False):
        result = gated.enqueue(str(folder), 5)
        (folder / "go").write_text("go")
        wait_until(lambda: state(result.id) == "completed", what="the job to complete")


def test_an_async_handler_that_ignores_its_cancellation_keeps_its_slot_until_it_returns(live_clock, folder):
    """Cancelling the handler's Future ended it at once: the worker counted the slot of a
    handler still running as free and started another job beside it."""
    first = async_ignores_cancel.using(timeout_ms=1_000).enqueue(str(folder))
    runner = ThreadWorker(concurrency=1)
    idle = Idle(runner)
    with runner:
        wait_until(lambda: list(folder.glob("started-*")), what="the async handler to start")
        second = stamp.enqueue(str(folder), 1)
        live_clock.advance(1_001)  # past timeout_ms: acked as timed out, its task cancelled
        wait_until(lambda: (folder / "cancel-ignored").exists(), what="the handler to swallow its cancellation")
        assert state(first.id) == "retryable"
        wait_until(idle, what="the worker to have nothing left to do")
        assert state(second.id) == "available" and runner.worker.slots.busy() == 1
        (folder / "go").write_text("go")
        wait_until(lambda: state(second.id) == "completed", what="the next job once the slot is free")
    started = float((folder / "start-1").read_text())
    (finished,) = folder.glob("finished-*")
    assert started >= finished.stat().st_mtime - 0.001
