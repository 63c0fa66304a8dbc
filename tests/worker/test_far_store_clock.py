"""A store clock days away from the workers' own clocks: every decision follows the store.

Workers on machines whose clocks are off cannot be made in a test, so the store clock is
frozen three days ahead of real time, then three days behind (``far_clock``), and real
workers (``boson_worker --burst`` in this process, its own connections) run the jobs:
anything that read a process's own clock instead of the store's would be three days off
-- a due time passed or far away, a bucket full or empty, a lease long gone or fresh.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.core.management import call_command

from boson_django import conf, services
from boson_django.models import StoredSchedule
from boson_django.schedules import scheduler
from tests.signals import finished_results
from tests.testapp.tasks import add, chooses, ephemeral, fail, noop, send_mail
from tests.worker.conftest import Proc, burst, job, state

MINUTE_MS = 60_000


def _ms(delta: timedelta) -> int:
    return int(delta / timedelta(milliseconds=1))


def test_run_after_is_due_on_the_store_clock_and_results_carry_store_times(far_clock):
    start = far_clock.now()
    result = add.using(run_after=start + timedelta(hours=1)).enqueue(1, 2)
    assert result.enqueued_at == start
    burst()
    assert state(result.id) == "scheduled"
    far_clock.advance(3_600_000 - 1)
    burst()
    assert state(result.id) == "scheduled"
    far_clock.advance(1)
    burst()
    done = add.get_result(result.id)
    assert done.return_value == 3
    assert done.enqueued_at == start
    assert done.started_at == done.last_attempted_at == done.finished_at == start + timedelta(hours=1)


def test_a_retry_waits_out_its_backoff_on_the_store_clock(far_clock):
    result = fail.enqueue("boom")
    burst()
    row = job(result.id)
    wait = row.run_at - far_clock.now()
    assert row.state == "retryable" and row.attempt == 1
    assert timedelta(0) < wait <= timedelta(milliseconds=conf.get().RETRY_BASE_MS)
    far_clock.advance(_ms(wait) - 1)
    burst()
    assert job(result.id).attempt == 1
    far_clock.advance(1)
    burst()
    assert job(result.id).attempt == 2


def test_a_snooze_waits_on_the_store_clock(far_clock):
    result = chooses.enqueue("snooze")  # snoozes 5 s, then succeeds
    burst()
    row = job(result.id)
    assert (row.state, row.run_at) == ("scheduled", far_clock.now() + timedelta(seconds=5))
    far_clock.advance(4_999)
    burst()
    assert state(result.id) == "scheduled"
    far_clock.advance(1)
    burst()
    assert chooses.get_result(result.id).return_value == "second run"


def test_a_lease_expires_and_is_reclaimed_on_the_store_clock(far_clock):
    result = noop.enqueue()
    (unit,) = services.admit("a-node-that-died", [], 1)
    lease_ms = unit.envelope.lease_ms
    assert unit.lease_expires_at == far_clock.now() + timedelta(milliseconds=lease_ms)
    burst()
    assert state(result.id) == "running"  # the lease still holds: nothing to reclaim
    far_clock.advance(lease_ms)
    burst()
    after = job(result.id)
    assert (after.state, after.crash_attempt, after.attempt) == ("completed", 1, 1)


def test_a_duty_changes_hands_only_once_it_lapses_on_the_store_clock(far_clock):
    assert services.claim_duty("boson.promote", "node-a", MINUTE_MS)
    result = add.using(run_after=far_clock.now() + timedelta(seconds=1)).enqueue(1, 1)
    far_clock.advance(1_000)
    burst()  # due, but node-a holds the promote duty: this worker does not promote
    assert state(result.id) == "scheduled"
    assert not services.claim_duty("boson.promote", "node-b", MINUTE_MS)
    far_clock.advance(MINUTE_MS - 1_001)
    assert not services.claim_duty("boson.promote", "node-b", MINUTE_MS)
    far_clock.advance(1)
    burst()
    assert add.get_result(result.id).return_value == 2


def test_a_schedule_fires_its_slots_by_the_store_clock(far_clock, settings):
    every = {"task": add.module_path, "every": timedelta(minutes=10), "args": [2, 3]}
    settings.BOSON = {**settings.BOSON, "SCHEDULES": {"tick": every}}
    scheduler.forget_sync()
    try:
        burst()  # syncs: the first slot is the next ten-minute mark after store time
        slot = StoredSchedule.objects.get(name="tick").next_run_at
        assert far_clock.now() < slot <= far_clock.now() + timedelta(minutes=10)
        far_clock.advance(_ms(slot - far_clock.now()) - 1)
        burst()
        assert services.list_jobs(task=add.module_path) == []
        far_clock.advance(1)
        burst()
    finally:
        scheduler.forget_sync()
    (fired,) = services.list_jobs(task=add.module_path)
    assert add.get_result(fired.id).return_value == 5
    assert services.job_state(fired.id)[0].meta == {"schedule": "tick", "slot": slot.isoformat()}


def test_a_rate_limit_refills_on_the_store_clock(far_clock):
    services.set_rate_limit("smtp", 2, MINUTE_MS)  # send_mail weighs 2: one a minute
    first, second = send_mail.enqueue("a"), send_mail.enqueue("b")
    burst()
    assert sorted([state(first.id), state(second.id)]) == ["available", "completed"]
    far_clock.advance(MINUTE_MS - 1)
    burst()
    assert sorted([state(first.id), state(second.id)]) == ["available", "completed"]
    far_clock.advance(1)
    burst()
    assert [state(first.id), state(second.id)] == ["completed", "completed"]


def test_a_finished_job_is_evicted_when_its_retention_passes_on_the_store_clock(far_clock):
    result = noop.using(retention_ms=MINUTE_MS).enqueue()
    burst()
    row = job(result.id)
    assert (row.finalized_at, row.expires_at) == (far_clock.now(), far_clock.now() + timedelta(minutes=1))
    far_clock.advance(MINUTE_MS - 1)
    burst()
    assert state(result.id) == "completed"
    far_clock.advance(1)
    burst()
    assert services.job_state(result.id) is None


def test_a_job_deleted_at_its_ack_is_reported_finished_at_store_time(far_clock):
    """retention_ms=0: the row is gone when ``task_finished`` is sent, so its result is
    built from the started one; it finished at the ack's store time, not the worker's."""
    with finished_results() as heard:
        result = ephemeral.enqueue()
        burst()
    (finished,) = [r for r in heard if r.id == result.id]
    assert services.job_state(result.id) is None
    assert finished.started_at == finished.finished_at == far_clock.now()


def test_captured_log_lines_are_stamped_with_store_time(far_clock):
    """A handler's log lines are stored with its attempt: they carry the attempt's store
    time (its admission plus the time since, in UTC), not the worker's own clock."""
    result = fail.using(max_attempts=1).enqueue("boom")
    burst()
    (record,) = services.errors(result.id)
    (line,) = [text for text in record.logs if "about to fail: boom" in text]
    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
    assert line[23:].startswith(" UTC WARNING tests.worker: about to fail: boom"), line
    assert far_clock.now() <= stamp < far_clock.now() + timedelta(seconds=10)


def test_boson_status_shows_times_against_the_store_clock(far_clock, capsys):
    noop.enqueue()
    services.admit("node-a", [], 1, lease_ms=30_000)
    assert services.claim_duty("boson.promote", "node-a", MINUTE_MS)
    add.using(run_after=far_clock.now() + timedelta(seconds=1)).enqueue(1, 1)
    far_clock.advance(91_000)  # the lease is 61 s gone; the job due 90 s ago; the duty lapsed
    call_command("boson_status")
    out = capsys.readouterr().out
    assert f"store time {far_clock.now().isoformat()}" in out
    assert "fence=1  expired" in out
    assert "boson.promote: free" in out
    assert "due 1m 30s ago" in out
    services.claim_duty("boson.promote", "node-a", MINUTE_MS)
    services.promote_due()
    services.admit("node-b", [], 1, lease_ms=30_000)
    call_command("boson_status")
    out = capsys.readouterr().out
    assert "held by node-a, expires in 1m 00s" in out
    assert "holder=node-b  fence=1  expires in 30s" in out


@pytest.mark.slow
def test_a_worker_process_follows_the_store_clock(far_clock, tmp_path, procs):
    """The same in a worker process of its own: it reads the frozen time from the store."""
    start = far_clock.now()
    later = add.using(run_after=start + timedelta(minutes=1)).enqueue(2, 2)
    failing = fail.using(max_attempts=2).enqueue("boom")

    def drain(name: str) -> None:
        worker = Proc(tmp_path, name, "--burst")
        procs.append(worker)
        assert worker.exit_code() == 0, worker.text()

    drain("w-first")
    assert (state(later.id), state(failing.id)) == ("scheduled", "retryable")
    far_clock.advance(MINUTE_MS)
    drain("w-second")
    assert add.get_result(later.id).finished_at == start + timedelta(minutes=1)
    assert (state(failing.id), job(failing.id).finalized_at) == ("failed", start + timedelta(minutes=1))
