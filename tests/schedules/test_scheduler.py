"""The scheduler's service layer on the frozen store clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from boson_django import clock, services
from boson_django.checks import check_settings
from boson_django.models import Job, ScheduleSlot, StoredSchedule
from boson_django.schedules import run_due, run_now, set_enabled, sync_schedules
from boson_django.schedules.scheduler import fire_slot, tick
from boson_django.worker.sweeper import Sweeper
from tests.conftest import EPOCH
from tests.factories import ADD, NOOP

KEYED = "tests.testapp.tasks.report_for"  # unique_key=lambda region: f"report:{region}"
FIXED_KEY = "tests.testapp.tasks.rebuild_index"  # unique_key="reindex"

MINUTE = timedelta(minutes=1)


def _declare(settings, **schedules):
    settings.BOSON = {**settings.BOSON, "SCHEDULES": schedules}


def _jobs(name: str) -> list[Job]:
    return list(Job.objects.filter(meta__schedule=name).order_by("enqueued_at", "id"))


def _step_minutes(store_clock, minutes: int) -> None:
    for _ in range(minutes):
        store_clock.advance(60_000)
        run_due()


def test_sync_makes_one_row_per_declaration_and_keeps_the_operators_switch(settings, store_clock):
    _declare(settings, tick={"task": NOOP, "cron": "*/5 * * * *", "args": []})
    sync_schedules()
    row = StoredSchedule.objects.get(name="tick")
    assert (row.task, row.cron, row.source, row.enabled, row.declared) == (NOOP, "*/5 * * * *", "settings", True, True)
    assert row.next_run_at == EPOCH + 5 * MINUTE
    set_enabled("tick", False)
    _declare(settings, tick={"task": NOOP, "cron": "*/10 * * * *"})
    assert sync_schedules() == 1
    row.refresh_from_db()
    assert (row.cron, row.enabled, row.next_run_at) == ("*/10 * * * *", False, EPOCH + 10 * MINUTE)
    _declare(settings)
    sync_schedules()
    row.refresh_from_db()
    assert row.declared is False, "kept for its history, never fires"
    assert sync_schedules() == 0


def test_a_sync_with_nothing_to_change_reads_once_and_locks_nothing(settings, store_clock):
    """The admin's schedule list syncs on every view: a sync that finds the rows as
    declared must not open the locking pass (on SQLite, the database's write lock)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _declare(settings, tick={"task": NOOP, "every": timedelta(minutes=5), "args": [("eu", 1)], "kwargs": {"at": (9, 30)}},
             tock={"task": NOOP, "cron": "0 * * * *"})  # the tuples are stored as JSON lists
    sync_schedules()
    with CaptureQueriesContext(connection) as ctx:
        assert sync_schedules() == 0
    assert len(ctx.captured_queries) == 1
    assert "FOR UPDATE" not in ctx.captured_queries[0]["sql"] and "SAVEPOINT" not in ctx.captured_queries[0]["sql"]
    _declare(settings, tick={"task": NOOP, "every": timedelta(minutes=10)}, tock={"task": NOOP, "cron": "0 * * * *"})
    assert sync_schedules() == 1, "a changed declaration still goes through"
    _declare(settings, tick={"task": NOOP, "every": timedelta(minutes=10)})
    assert sync_schedules() == 1, "so does one no longer declared"
    assert StoredSchedule.objects.get(name="tock").declared is False


def test_schedules_declared_next_to_the_task(settings, store_clock):
    import tests.schedules.tasks  # noqa: F401 -- registers the tasks and their schedules

    settings.BOSON = {**settings.BOSON, "TASK_MODULES": [*settings.BOSON["TASK_MODULES"], "tests.schedules.tasks"]}
    sync_schedules()
    rows = {r.name: r for r in StoredSchedule.objects.filter(source="code", task__startswith="tests.schedules.")}
    assert set(rows) == {"tests.schedules.tasks.nightly", "tests-report-eu", "tests-report-us"}
    assert rows["tests-report-eu"].timezone == "Europe/Paris" and rows["tests-report-eu"].args == ["eu"]
    assert rows["tests-report-us"].every_ms == 600_000 and rows["tests-report-us"].queue == "reports"
    _step_minutes(store_clock, 30)
    assert [j.args for j in _jobs("tests-report-eu")] == [["eu"], ["eu"]]
    assert {j.queue for j in _jobs("tests-report-us")} == {"reports"} and len(_jobs("tests-report-us")) == 3


def test_each_due_slot_is_enqueued_once_with_its_slot_in_meta(settings, store_clock):
    _declare(settings, minutely={"task": ADD, "cron": "* * * * *", "args": [1, 2]})
    sync_schedules()
    _step_minutes(store_clock, 3)
    run_due()
    jobs = _jobs("minutely")
    assert [j.meta["slot"] for j in jobs] == [(EPOCH + i * MINUTE).isoformat() for i in (1, 2, 3)]
    assert {(j.task, tuple(j.args), j.state) for j in jobs} == {(ADD, (1, 2), "available")}
    row = StoredSchedule.objects.get(name="minutely")
    assert (row.last_slot_at, row.last_job_id, row.next_run_at) == (EPOCH + 3 * MINUTE, jobs[-1].id, EPOCH + 4 * MINUTE)


def test_the_scheduler_restores_the_declarations_an_older_process_synced_over(settings, store_clock):
    """A rolling deploy: the workers run the new code, a web process still runs the old one
    and its admin list syncs the old declarations (the new schedule becomes undeclared).
    The workers had synced once and never again: it stayed off until they restarted."""
    _declare(settings, minutely={"task": NOOP, "cron": "* * * * *"})
    run_due()  # the worker's first pass syncs
    _declare(settings)
    sync_schedules()  # the older process, which does not declare it
    assert StoredSchedule.objects.get(name="minutely").declared is False
    _declare(settings, minutely={"task": NOOP, "cron": "* * * * *"})  # the worker's declarations again
    _step_minutes(store_clock, 3)
    assert [j.meta["slot"] for j in _jobs("minutely")] == [(EPOCH + i * MINUTE).isoformat() for i in (2, 3)]


def test_a_refused_sync_is_logged_once_not_every_pass(settings, store_clock, caplog):
    _declare(settings, minutely={"task": NOOP, "cron": "* * * * *"}, bad={"task": NOOP, "cron": "99 * * * *"})
    _step_minutes(store_clock, 3)
    refused = [r for r in caplog.records if r.getMessage().startswith("boson: schedules not synced")]
    assert len(refused) == 1 and "Bad minute" in refused[0].getMessage()


def test_only_the_latest_slots_of_a_schedule_are_kept(settings, store_clock, monkeypatch):
    """Every fired slot was kept forever: an every-second schedule added 86,400 rows a day.
    Older slots than the kept ones lie before ``next_run_at``; no pass can fire them again."""
    from boson_django.schedules import scheduler

    monkeypatch.setattr(scheduler, "KEEP_SLOTS", 3)
    _declare(settings, minutely={"task": NOOP, "cron": "* * * * *"}, other={"task": NOOP, "every": timedelta(minutes=2)})
    run_due()
    _step_minutes(store_clock, 6)
    assert len(_jobs("minutely")) == 6 and len(_jobs("other")) == 3
    kept = ScheduleSlot.objects.filter(schedule="minutely").order_by("slot_at").values_list("slot_at", flat=True)
    assert list(kept) == [EPOCH + i * MINUTE for i in (4, 5, 6)]
    assert ScheduleSlot.objects.filter(schedule="other").count() == 3, "each schedule keeps its own"


def test_a_stale_scheduler_cannot_enqueue_a_slot_twice(settings, store_clock):
    """A leader that read the schedule, paused past its duty lease, and then fires the slot
    another worker already fired: the (schedule, slot) unique key refuses it."""
    _declare(settings, minutely={"task": NOOP, "cron": "* * * * *"})
    sync_schedules()
    stale_row = StoredSchedule.objects.get(name="minutely")  # read before the pause
    store_clock.advance(60_000)
    assert len(tick("minutely", holder="new-leader")) == 1
    assert fire_slot(stale_row, EPOCH + MINUTE, now=clock.now(), using="default", holder="old-leader") is None
    assert len(_jobs("minutely")) == 1
    assert list(ScheduleSlot.objects.values_list("holder", flat=True)) == ["new-leader"]
    assert tick("minutely", holder="old-leader") == [], "not due again until the next slot"


@pytest.mark.parametrize("missed, fired_slots, skipped", [("run_once", [59], 58), ("skip", [], 59)])
def test_after_downtime_missed_slots_follow_the_schedules_policy(settings, store_clock, missed, fired_slots, skipped):
    _declare(settings, m={"task": NOOP, "cron": "* * * * *", "missed": missed, "grace_ms": 10_000})
    sync_schedules()
    store_clock.advance(60 * 60_000 - 30_000)  # down until 00:59:30: slots 00:01..00:59 are late
    run_due()
    assert [j.meta["slot"] for j in _jobs("m")] == [(EPOCH + i * MINUTE).isoformat() for i in fired_slots]
    assert StoredSchedule.objects.get(name="m").skipped_slots == skipped
    store_clock.advance(30_000)
    run_due()
    assert len(_jobs("m")) == len(fired_slots) + 1, "back on time at 01:00"


def test_dst_in_paris_through_the_scheduler(settings, store_clock):
    """Fall back (2030-10-27): the fixed-time 02:30 runs once, the half-hourly runs in both 02:xx hours."""
    store_clock.freeze(datetime(2030, 10, 26, 23, 0, tzinfo=timezone.utc))  # 01:00 CEST
    _declare(settings,
             fixed={"task": NOOP, "cron": "30 2 * * *", "timezone": "Europe/Paris"},
             half={"task": NOOP, "cron": "*/30 * * * *", "timezone": "Europe/Paris"})
    _step_minutes(store_clock, 4 * 60)  # to 03:00 UTC = 04:00 CET
    assert [j.meta["slot"] for j in _jobs("fixed")] == ["2030-10-27T00:30:00+00:00"]
    assert len(_jobs("half")) == 8, "01:30 CEST .. 04:00 CET is eight half-hours, 02:00 and 02:30 twice"


def test_a_fixed_time_seen_in_the_repeated_hour_of_fall_back_is_next_due_tomorrow(settings, store_clock):
    """Paris falls back on 2030-10-27: 02:30 CEST (00:30 UTC) passed, then 02:00 CEST comes
    again as 02:00 CET. Seen in that second hour, the next 02:30 is tomorrow's: a schedule
    declared then does not fire the 02:30 of an hour ago, and one back from downtime fires
    that slot once and moves on to tomorrow."""
    tomorrow = datetime(2030, 10, 28, 1, 30, tzinfo=timezone.utc)
    store_clock.freeze(datetime(2030, 10, 27, 0, 0, tzinfo=timezone.utc))  # 02:00 CEST
    _declare(settings, down={"task": NOOP, "cron": "30 2 * * *", "timezone": "Europe/Paris"})
    sync_schedules()
    store_clock.freeze(datetime(2030, 10, 27, 1, 10, tzinfo=timezone.utc))  # 02:10 CET; workers were down
    _declare(settings,
             down={"task": NOOP, "cron": "30 2 * * *", "timezone": "Europe/Paris"},
             new={"task": NOOP, "cron": "30 2 * * *", "timezone": "Europe/Paris"})
    sync_schedules()
    run_due()
    assert [j.meta["slot"] for j in _jobs("down")] == ["2030-10-27T00:30:00+00:00"]
    assert _jobs("new") == []
    assert {r.name: r.next_run_at for r in StoredSchedule.objects.filter(name__in=["down", "new"])} == {
        "down": tomorrow, "new": tomorrow,
    }


def test_run_now_enqueues_through_the_services_without_touching_slots(settings, store_clock):
    _declare(settings, daily={"task": ADD, "cron": "0 3 * * *", "args": [2, 3]})
    sync_schedules()
    set_enabled("daily", False)
    job_id = run_now("daily")
    envelope, state = services.job_state(job_id)
    assert (envelope.task, envelope.args, envelope.meta, state) == (ADD, [2, 3], {"schedule": "daily"}, "available")
    row = StoredSchedule.objects.get(name="daily")
    assert (row.last_job_id, row.last_run_at, row.last_slot_at) == (job_id, EPOCH, None)
    assert not ScheduleSlot.objects.exists()
    with pytest.raises(StoredSchedule.DoesNotExist):
        run_now("nope")


def test_a_unique_key_function_of_the_task_holds_back_slots_while_its_job_is_live(settings, store_clock):
    _declare(settings, keyed={"task": KEYED, "cron": "* * * * *", "args": ["eu"]})
    sync_schedules()
    _step_minutes(store_clock, 2)
    (job,) = _jobs("keyed")
    assert job.unique_key == "report:eu"
    assert list(ScheduleSlot.objects.filter(schedule="keyed").values_list("job_id", flat=True)) == [job.id, job.id]
    assert run_now("keyed") == job.id


def test_a_fixed_unique_key_of_the_task_holds_back_slots_while_its_job_is_live(settings, store_clock):
    _declare(settings, fixed={"task": FIXED_KEY, "cron": "* * * * *"})
    sync_schedules()
    _step_minutes(store_clock, 2)
    (job,) = _jobs("fixed")
    assert job.unique_key == "reindex"
    assert run_now("fixed") == job.id


def test_enabling_starts_from_the_next_slot_not_the_ones_switched_off(settings, store_clock):
    _declare(settings, minutely={"task": NOOP, "cron": "* * * * *"})
    sync_schedules()
    assert set_enabled("minutely", False) is True and set_enabled("minutely", False) is False
    _step_minutes(store_clock, 30)
    set_enabled("minutely", True)
    assert StoredSchedule.objects.get(name="minutely").next_run_at == EPOCH + 31 * MINUTE
    _step_minutes(store_clock, 1)
    assert len(_jobs("minutely")) == 1


def test_a_schedule_whose_task_is_gone_is_postponed_and_others_still_fire(settings, store_clock):
    _declare(settings, good={"task": NOOP, "cron": "* * * * *"}, bad={"task": "tests.testapp.tasks.vanished", "cron": "* * * * *"})
    run_due()  # the worker's first pass syncs the declarations
    _step_minutes(store_clock, 2)
    assert len(_jobs("good")) == 2 and _jobs("bad") == []
    assert StoredSchedule.objects.get(name="bad").next_run_at == EPOCH + 3 * MINUTE
    assert StoredSchedule.objects.get(name="bad").skipped_slots == 2, "each slot given up counts as skipped"


def test_a_schedule_whose_task_is_gone_says_so_in_the_log(settings, store_clock, caplog):
    _declare(settings, bad={"task": "tests.testapp.tasks.vanished", "cron": "* * * * *"})
    run_due()
    _step_minutes(store_clock, 1)
    (record,) = [r for r in caplog.records if r.name == "boson_django.schedules" and r.levelname == "ERROR"]
    assert record.getMessage().startswith("boson: schedule bad could not enqueue: ")
    assert "tests.testapp.tasks.vanished" in record.getMessage()


def test_the_workers_sweeper_runs_the_scheduler_under_its_duty(settings, store_clock):
    _declare(settings, minutely={"task": NOOP, "cron": "* * * * *"})
    sweeper = Sweeper("w-1", "default", interval_ms=1_000, batch=100)
    assert sweeper.run()["boson.schedule"] == 0  # syncs, nothing due yet
    store_clock.advance(60_000)
    assert sweeper.run()["boson.schedule"] == 1
    assert Sweeper("w-2", "default", interval_ms=1_000, batch=100).run()["boson.schedule"] is None
    assert len(_jobs("minutely")) == 1
    fired_by = ScheduleSlot.objects.filter(schedule="minutely").values_list("holder", flat=True)
    assert list(fired_by) == ["w-1"], "the slot names who fired it"


@pytest.mark.parametrize("entry, message", [
    ({"cron": "* * * * *"}, "needs a 'task'"),
    ({"task": NOOP, "cron": "99 * * * *"}, "Bad minute"),
    ({"task": NOOP, "cron": "* * * * *", "every_minute": True}, "unknown keys: every_minute"),
    ({"task": "no.such.task", "cron": "* * * * *"}, "not a registered task"),
    ({"task": NOOP, "cron": "* * * * *", "queue": "q" * 101}, "entry 's': queue: must be at most 100 characters"),
    ({"task": NOOP, "cron": "* * * * *", "enabled": "no"}, "entry 's': Schedule enabled='no'"),
])
def test_checks_report_a_bad_schedule_setting(settings, entry, message):
    _declare(settings, s=entry)
    (error,) = [e for e in check_settings() if e.id == "boson.E002"]
    assert "BOSON['SCHEDULES']" in error.msg and message in error.msg


def test_a_grace_shorter_than_a_duty_hand_over_is_warned_about(settings, store_clock):
    """The scheduler sees a slot up to a sweep interval after its time (a hand-over of its
    duty, three): with ``grace_ms=0`` and ``missed="skip"`` no slot was ever on time, and
    the schedule never ran -- without a word from the checks."""
    from django.core import checks

    _declare(settings, heartbeat={"task": NOOP, "every": timedelta(seconds=10), "missed": "skip", "grace_ms": 0},
             fine={"task": NOOP, "every": timedelta(seconds=10), "missed": "skip", "grace_ms": 3_000})
    store_clock.advance(500)  # a worker's pass lands somewhere in the second, not on it
    for _ in range(30):
        store_clock.advance(1_000)
        run_due()
    assert _jobs("heartbeat") == [] and StoredSchedule.objects.get(name="heartbeat").skipped_slots == 3
    assert len(_jobs("fine")) == 3
    (warning,) = [m for m in checks.run_checks(tags=["boson"]) if m.id == "boson.W003"]
    assert "'heartbeat'" in warning.msg and "grace_ms=0" in warning.msg and "3000 ms" in warning.msg
