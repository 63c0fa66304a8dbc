"""Stalls and time: a worker frozen with SIGSTOP past its lease, the store clock jumping
past many leases at once, checkpoints resumed after a kill, SIGTERM five times, and a
queue paused while a worker waits. Real processes; time moves only on the store clock."""

from __future__ import annotations

import signal

import pytest

from boson_django import services
from boson_django.models import Job, JobData, Run
from tests.faults.checker import assert_sound, effects_of, starts_of
from tests.faults.support import enqueue_many, wait_file, wait_until
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

EFFECT = "tests.testapp.fault_tasks.effect"
STEPS = "tests.testapp.fault_tasks.steps"
LEASE_MS = 5_000


def _snapshot(job_id: str) -> tuple:
    return (
        Job.objects.filter(id=job_id).values().get(),
        list(Run.objects.filter(job_id=job_id).order_by("id").values()),
        list(JobData.objects.filter(job_id=job_id).order_by("id").values()),
    )


def test_a_worker_stopped_past_its_lease_is_refused_everything_when_it_resumes(live_clock, tmp_path, workers):
    (job_id,) = enqueue_many(EFFECT, 1, args=[str(tmp_path), "go", "", 1], lease_ms=LEASE_MS)
    stale = workers("w-stale")
    wait_file(tmp_path, f"started-{job_id}-1")
    stale.signal(signal.SIGSTOP)
    live_clock.advance(LEASE_MS + 1)
    assert [r.job_id for r in services.reclaim_expired()] == [job_id]
    (tmp_path / "go").write_text("go")
    current = workers("w-current", "--burst")
    assert current.exit_code() == 0, current.text()
    assert effects_of(job_id) == [2]
    before = _snapshot(job_id)
    stale.signal(signal.SIGCONT)  # its handler sees the gate, returns, and tries to ack
    stale.wait_for_line(f"job {job_id}")
    wait_until(lambda: "not stored" in stale.text() or "was lost" in stale.text(), what="the stale worker to learn")
    stale.signal(signal.SIGTERM)
    assert stale.exit_code() == 0, stale.text()
    assert _snapshot(job_id) == before
    job = Job.objects.get(id=job_id)
    assert (job.state, job.fence, job.attempt, job.crash_attempt) == ("completed", 2, 1, 1)
    assert effects_of(job_id) == [2] and starts_of(job_id) == [1, 2]
    assert_sound([job_id])


@pytest.mark.slow
def test_the_store_clock_jumping_past_many_leases(live_clock, tmp_path, workers):
    held = enqueue_many(EFFECT, 40, args=[str(tmp_path), "go"], lease_ms=LEASE_MS)
    pool = [workers(f"w-jump-{i}", "--concurrency", "20") for i in range(2)]
    for job_id in held:
        wait_file(tmp_path, f"started-{job_id}-1")
    live_clock.advance(LEASE_MS * 100)  # every lease lapses at once
    (tmp_path / "go").write_text("go")
    wait_until(lambda: services.counts().get("completed") == 40, timeout=60, what="every job to complete")
    for worker in pool:
        worker.signal(signal.SIGTERM)
        assert worker.exit_code() == 0, worker.text()
    for job_id in held:
        job = Job.objects.get(id=job_id)
        assert (job.attempt, job.crash_attempt) == (1, 1), (job_id, job.attempt, job.crash_attempt)
        assert effects_of(job_id) == [job.fence] and len(starts_of(job_id)) == 2
    assert_sound(held)


def test_checkpointed_steps_resume_after_a_kill_and_no_committed_step_reruns(live_clock, tmp_path, workers):
    (job_id,) = enqueue_many(STEPS, 1, args=[str(tmp_path), 5, 2], lease_ms=LEASE_MS)
    doomed = workers("w-steps")
    wait_file(tmp_path, f"ran-{job_id}-2-1")
    doomed.kill()
    assert Job.objects.get(id=job_id).checkpoint == {"step": 2}
    live_clock.advance(LEASE_MS + 1)
    services.reclaim_expired()
    rescuer = workers("w-steps-2", "--burst")
    assert rescuer.exit_code() == 0, rescuer.text()
    ran = sorted(p.name.removeprefix(f"ran-{job_id}-") for p in tmp_path.glob(f"ran-{job_id}-*"))
    assert ran == ["0-1", "1-1", "2-1", "2-2", "3-2", "4-2"]  # only the uncommitted step 2 ran twice
    assert services.get_result(job_id).data == 5 and effects_of(job_id) == [2]
    assert_sound([job_id])


def test_sigterm_five_times_releases_once_and_exits_zero(live_clock, tmp_path, workers):
    held = enqueue_many(EFFECT, 2, args=[str(tmp_path), "go"], lease_ms=LEASE_MS)
    worker = workers("w-term", "--concurrency", "2", "--grace-seconds", "600")
    for job_id in held:
        wait_file(tmp_path, f"started-{job_id}-1")
    worker.signal(signal.SIGTERM)
    worker.wait_for_line("stopping (SIGTERM)")
    worker.signal(signal.SIGTERM)  # the second ends the grace: release now
    worker.wait_for_line("stopped after")  # the loop is over; the process is on its way out
    for _ in range(3):  # a supervisor insisting must not turn a clean exit into death by signal
        if worker.popen.poll() is None:
            worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    assert "Traceback" not in worker.text(), worker.text()
    for job_id in held:
        job = Job.objects.get(id=job_id)
        assert (job.state, job.attempt, job.crash_attempt) == ("available", 0, 0)
        assert [r.outcome for r in services.errors(job_id)] == ["released"]
    (tmp_path / "go").write_text("go")
    after = workers("w-after-term", "--burst")
    assert after.exit_code() == 0, after.text()
    assert all(effects_of(j) == [2] for j in held)
    assert_sound(held)


def test_a_queue_paused_while_a_worker_waits_is_left_alone_until_resumed(live_clock, tmp_path, workers):
    worker = workers("w-waiting", "--queue", "paused", "--queue", "open")
    worker.wait_for_line("up (queues=")
    services.pause_queue("paused")
    parked = enqueue_many(EFFECT, 5, queue="paused")
    probe = enqueue_many(EFFECT, 1, queue="open")
    wait_until(lambda: services.job_state(probe[0])[1] == "completed", what="the open queue's job")
    probe2 = enqueue_many(EFFECT, 1, queue="open")  # enqueued after the worker passed the paused jobs over
    wait_until(lambda: services.job_state(probe2[0])[1] == "completed", what="a second open-queue job")
    assert services.counts("paused") == {**services.counts("paused"), "available": 5}
    assert starts_of(parked[0]) == []
    services.resume_queue("paused")
    wait_until(lambda: services.counts("paused").get("completed") == 5, what="the resumed queue to drain")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0, worker.text()
    assert all(effects_of(j) == [1] for j in parked)
    assert_sound([*parked, *probe, *probe2])
