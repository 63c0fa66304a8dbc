"""Workers killed with SIGKILL: mid-job, between the effect and the ack's commit, by a
poison job; and crash versus failure accounting. Real processes on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from boson_django import services
from boson_django.models import Job
from tests.faults.checker import assert_sound, effects_of, starts_of
from tests.faults.support import enqueue_many, wait_file, wait_until
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

EFFECT = "tests.testapp.fault_tasks.effect"
POISON = "tests.testapp.fault_tasks.poison"
FAILS = "tests.testapp.fault_tasks.fails_once_allowed"
LEASE_MS = 5_000


def _job(job_id: str) -> Job:
    return Job.objects.get(id=job_id)


def _expire_and_reclaim(live_clock, lease_ms: int = LEASE_MS) -> list:
    live_clock.advance(lease_ms + 1)
    return services.reclaim_expired()


def test_sigkill_mid_job_with_several_jobs_in_flight(live_clock, tmp_path, workers):
    held = enqueue_many(EFFECT, 4, args=[str(tmp_path), "go"], lease_ms=LEASE_MS)
    doomed = workers("w-doomed", "--concurrency", "4")
    for job_id in held:
        wait_file(tmp_path, f"started-{job_id}-1")
    doomed.kill()
    assert {_job(j).state for j in held} == {"running"}
    assert len(_expire_and_reclaim(live_clock)) == 4
    (tmp_path / "go").write_text("go")
    rescuer = workers("w-rescuer", "--burst", "--concurrency", "2")
    assert rescuer.exit_code() == 0, rescuer.text()
    for job_id in held:
        job = _job(job_id)
        assert (job.state, job.attempt, job.crash_attempt, job.fence) == ("completed", 1, 1, 2)
        assert effects_of(job_id) == [2] and starts_of(job_id) == [1, 2]
    assert_sound(held)


def test_sigkill_between_the_effect_and_the_ack_commit_leaves_no_effect(live_clock, tmp_path, workers):
    (job_id,) = enqueue_many(EFFECT, 1, args=[str(tmp_path), "", "ack-go", 7], lease_ms=LEASE_MS)
    doomed = workers("w-mid-ack")
    wait_file(tmp_path, f"in-ack-{job_id}-1")  # the effect row is written, the ack not committed
    doomed.kill()
    assert effects_of(job_id) == [] and _job(job_id).state == "running"
    assert [r.job_id for r in _expire_and_reclaim(live_clock)] == [job_id]
    rescuer = workers("w-after", "--burst")
    assert rescuer.exit_code() == 0, rescuer.text()
    job = _job(job_id)
    assert (job.state, job.attempt, job.crash_attempt) == ("completed", 1, 1)
    assert effects_of(job_id) == [2] and services.get_result(job_id).data == 7
    assert_sound([job_id])


@pytest.mark.slow
def test_a_poison_job_is_quarantined_at_the_crash_limit_while_other_jobs_flow(live_clock, tmp_path, workers):
    (pill,) = enqueue_many(POISON, 1, queue="poison", lease_ms=LEASE_MS)
    normal = enqueue_many(EFFECT, 30, queue="normal")
    steady = workers("w-steady", "--queue", "normal", "--concurrency", "4")
    for crash in range(1, 4):
        victim = workers(f"w-victim-{crash}", "--queue", "poison", "--burst", "--concurrency", "1")
        assert victim.exit_code() == -9, victim.text()
        (reclaimed,) = _expire_and_reclaim(live_clock)
        assert (reclaimed.job_id, reclaimed.crash_attempt) == (pill, crash)
    job = _job(pill)
    assert (job.state, job.attempt, job.crash_attempt) == ("quarantined", 0, 3)
    (again,) = enqueue_many(POISON, 1, queue="poison")
    assert services.job_state(again)[1] == "quarantined"
    survivor = workers("w-survivor", "--queue", "poison", "--burst")
    assert survivor.exit_code() == 0, survivor.text()  # nothing left to kill it
    wait_until(lambda: services.counts("normal").get("completed") == 30, what="the normal queue to drain")
    steady.signal(15)
    assert steady.exit_code() == 0, steady.text()
    assert starts_of(pill) == [1, 2, 3] and starts_of(again) == []
    assert all(effects_of(j) == [1] for j in normal)
    assert_sound([pill, again, *normal])


@pytest.mark.slow
def test_with_max_attempts_1_a_crash_does_not_fail_the_job_but_a_failure_does(live_clock, tmp_path, workers):
    (job_id,) = enqueue_many(FAILS, 1, args=[str(tmp_path), "never"], lease_ms=LEASE_MS)
    doomed = workers("w-crash")
    wait_file(tmp_path, f"started-{job_id}-1")
    doomed.kill()
    _expire_and_reclaim(live_clock)
    job = _job(job_id)
    assert (job.state, job.attempt, job.crash_attempt, job.max_attempts) == ("available", 0, 1, 1)
    second = workers("w-fail", "--burst")
    assert second.exit_code() == 0, second.text()
    job = _job(job_id)
    assert (job.state, job.attempt, job.crash_attempt) == ("failed", 1, 1)
    assert [r.outcome for r in services.errors(job_id)] == ["lease_lost", "retry"]
    assert_sound([job_id])
