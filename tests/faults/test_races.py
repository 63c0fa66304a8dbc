"""Races and storms: the retention sweep racing acks, transactional enqueue rolled back
(also in a savepoint), a killed duty holder taken over within one lease by a process on
the same host, and a retry storm of 1,000 failing jobs that must not starve other queues."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from django.db import transaction

from boson_django import conf, services
from boson_django.models import Duty, Job
from boson_django.services import Envelope, Outcome
from tests.concurrency.support import run_threads
from tests.faults.checker import assert_sound, effects_of
from tests.faults.support import enqueue_many, wait_file, wait_until
from tests.testapp import fault_tasks  # noqa: F401 -- registers the tasks in this process

EFFECT = "tests.testapp.fault_tasks.effect"
ALWAYS_FAILS = "tests.testapp.fault_tasks.always_fails"
NOOP = "tests.testapp.tasks.noop"


def _admit_all(queue: str, count: int) -> list:
    units = []
    while len(units) < count:
        units += services.admit("w-race", [queue], 100, lease_ms=600_000)
    return units


def test_the_retention_sweep_racing_acks_never_deletes_early_or_loses_a_job(live_clock):
    first = enqueue_many(NOOP, 200, queue="ret", retention_ms=1_000)
    units = _admit_all("ret", 200)
    evicted: list[int] = []

    def race(i: int) -> None:
        if i < 4:
            for n, unit in enumerate(units[i::4]):
                services.ack(unit.lease, Outcome.SUCCESS if n % 2 else Outcome.DISCARD, error="x")
        else:
            while Job.objects.filter(queue="ret", state="running").exists():
                evicted.append(services.evict_retained(50))

    run_threads(6, race)
    assert sum(evicted) == 0 and Job.objects.filter(id__in=first).count() == 200  # nothing had expired
    live_clock.advance(1_000)
    second = enqueue_many(NOOP, 200, queue="ret", retention_ms=1_000)
    units = _admit_all("ret", 200)
    run_threads(6, race)
    while services.evict_retained(100):
        pass
    assert not Job.objects.filter(id__in=first).exists()  # expired: evicted
    assert Job.objects.filter(id__in=second).count() == 200  # just acked: kept
    assert_sound([*first, *second], may_be_gone=first)


def test_transactional_enqueue_rolled_back_also_in_a_savepoint(live_clock, workers):
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            doomed = [fault_tasks.effect.enqueue().id, *enqueue_many(EFFECT, 2, unique_key="held-by-doomed")]
            raise RuntimeError("the order failed to save")
    with transaction.atomic():
        kept = enqueue_many(EFFECT, 1)
        with pytest.raises(RuntimeError):
            with transaction.atomic():  # a savepoint
                doomed += enqueue_many(EFFECT, 1, unique_key="savepoint-key")
                raise RuntimeError("the inner step failed")
        kept += [services.enqueue([Envelope(task=EFFECT, unique_key="savepoint-key")])[0].id]
    assert all(services.job_state(j) is None for j in doomed)
    assert services.enqueue([Envelope(task=EFFECT, unique_key="held-by-doomed")])[0].disposition == "created"
    kept.append(Job.objects.get(unique_key="held-by-doomed").id)
    worker = workers("w-tx", "--burst")
    assert worker.exit_code() == 0, worker.text()
    assert all(effects_of(j) == [1] for j in kept)
    assert_sound(kept)  # the rolled-back jobs never appear


def _holder(name: str) -> str | None:
    row = Duty.objects.filter(name=name).first()
    return None if row is None else row.holder


def test_a_killed_duty_holder_is_taken_over_within_one_lease_by_a_process_on_the_same_host(live_clock, tmp_path, workers):
    (job_id,) = enqueue_many(EFFECT, 1, args=[str(tmp_path), "go"], lease_ms=5_000)
    first = workers("first", "--concurrency", "1", default_id=True)  # id: host:pid:token
    wait_file(tmp_path, f"started-{job_id}-1")
    wait_until(lambda: (_holder("boson.reclaim") or "").split(":")[1:2] == [str(first.pid)], what="the first to hold reclaim")
    held_by = _holder("boson.reclaim")
    second = workers("second", "--concurrency", "1", default_id=True)
    second.wait_for_line("up (queues=")
    first.kill()
    duty_ms = max(conf.get().SWEEP_INTERVAL_MS * 3, 1_000)
    assert services.claim_duty("boson.reclaim", "intruder", duty_ms) is False  # not lapsed yet: no second holder
    assert _holder("boson.reclaim") == held_by
    (tmp_path / "go").write_text("go")
    live_clock.advance(max(duty_ms, 5_000) + 1)  # one duty lease (and the job's lease) on the store clock
    wait_until(lambda: (_holder("boson.reclaim") or "").split(":")[1:2] == [str(second.pid)], what="the takeover")
    assert held_by.split(":")[0] == _holder("boson.reclaim").split(":")[0]  # same host name, other process
    wait_until(lambda: services.job_state(job_id)[1] == "completed", what="the orphaned job to run again")
    second.signal(signal.SIGTERM)
    assert second.exit_code() == 0, second.text()
    assert effects_of(job_id) == [2]
    assert_sound([job_id])


@pytest.mark.slow
def test_a_retry_storm_of_1000_failing_jobs_spreads_its_retries_and_starves_no_queue(live_clock, workers):
    storm = enqueue_many(ALWAYS_FAILS, 1_000, queue="storm")
    pool = [workers(f"w-storm-{i}", "--concurrency", "8") for i in range(2)]
    wait_until(lambda: Job.objects.filter(id__in=storm, attempt=1).count() == 1_000, timeout=120, what="the first wave")
    run_ats = list(Job.objects.filter(id__in=storm).values_list("run_at", flat=True))
    now = live_clock.now()
    base = timedelta(milliseconds=conf.get().RETRY_BASE_MS)
    assert all(now <= at <= now + base for at in run_ats)
    assert len(set(run_ats)) > 300 and max(run_ats) - min(run_ats) > base / 4  # jitter spreads them over ms
    calm = enqueue_many(EFFECT, 50, queue="calm")
    live_clock.advance(conf.get().RETRY_BASE_MS)  # the whole storm comes due at once...
    wait_until(lambda: services.counts("calm").get("completed") == 50, timeout=120, what="the calm queue")
    for step in range(4):  # ...and is walked to its end; attempt 3 of 3 fails it
        live_clock.advance(conf.get().RETRY_BASE_MS * 2 ** (step + 1))
        if Job.objects.filter(id__in=storm, state="failed").count() == 1_000:
            break
        wait_until(lambda: not Job.objects.filter(id__in=storm, state__in=["available", "running"]).exists()
                   and not Job.objects.filter(id__in=storm, state="retryable", run_at__lte=live_clock.now()).exists(),
                   timeout=120, what="the storm wave")
    wait_until(lambda: Job.objects.filter(id__in=storm, state="failed").count() == 1_000, timeout=120, what="the storm to end")
    for worker in pool:
        worker.signal(signal.SIGTERM)
        assert worker.exit_code() == 0, worker.text()
    assert set(Job.objects.filter(id__in=storm).values_list("attempt", flat=True)) == {3}
    assert all(effects_of(j) == [1] for j in calm)
    assert_sound([*storm, *calm])
