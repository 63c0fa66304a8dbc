"""Slot arithmetic without a database: cron in a time zone across DST, intervals, missed slots."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from boson_django.schedules import Schedule
from boson_django.schedules.slots import MAX_SCAN, Timing, plan
from boson_django.schedules.spec import as_schedules

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")


def slots(timing: Timing, start: datetime, end: datetime) -> list[datetime]:
    found, at = [], start
    while (at := timing.next_after(at)) is not None and at <= end:
        found.append(at)
    return found


def paris(*fields: int, fold: int = 0) -> datetime:
    return datetime(*fields, tzinfo=PARIS, fold=fold).astimezone(UTC)


# -- spring forward: Paris 2030-03-31, 02:00 CET -> 03:00 CEST (01:00 UTC) ----------------

def test_spring_forward_a_fixed_time_in_the_gap_runs_once_at_the_end_of_the_gap():
    daily = Timing("30 2 * * *", None, "Europe/Paris")
    got = slots(daily, paris(2030, 3, 29, 12, 0), paris(2030, 4, 1, 12, 0))
    assert got == [paris(2030, 3, 30, 2, 30), paris(2030, 3, 31, 3, 0), paris(2030, 4, 1, 2, 30)]


def test_spring_forward_wildcard_hour_slots_in_the_gap_do_not_exist():
    every_30 = Timing("*/30 * * * *", None, "Europe/Paris")
    got = slots(every_30, paris(2030, 3, 31, 1, 0), paris(2030, 3, 31, 4, 0))
    assert got == [paris(2030, 3, 31, 1, 30), paris(2030, 3, 31, 3, 0), paris(2030, 3, 31, 3, 30), paris(2030, 3, 31, 4, 0)]
    assert got[1] - got[0] == timedelta(minutes=30), "01:30 CET to 03:00 CEST is half an hour"


# -- fall back: Paris 2030-10-27, 03:00 CEST -> 02:00 CET (01:00 UTC) ---------------------

def test_fall_back_a_fixed_time_in_the_repeated_hour_runs_once_at_its_first_occurrence():
    daily = Timing("30 2 * * *", None, "Europe/Paris")
    got = slots(daily, paris(2030, 10, 26, 12, 0), paris(2030, 10, 28, 12, 0))
    assert got == [paris(2030, 10, 27, 2, 30, fold=0), paris(2030, 10, 28, 2, 30)]
    assert got[0] == datetime(2030, 10, 27, 0, 30, tzinfo=UTC)


def test_fall_back_wildcard_hour_slots_run_in_both_occurrences_of_the_hour():
    every_30 = Timing("*/30 * * * *", None, "Europe/Paris")
    got = slots(every_30, paris(2030, 10, 27, 1, 45), paris(2030, 10, 27, 3, 0))
    assert got == [
        paris(2030, 10, 27, 2, 0, fold=0), paris(2030, 10, 27, 2, 30, fold=0),
        paris(2030, 10, 27, 2, 0, fold=1), paris(2030, 10, 27, 2, 30, fold=1), paris(2030, 10, 27, 3, 0),
    ]
    assert len(set(got)) == len(got) and got == sorted(got), "distinct instants, in order"
    assert all(b - a == timedelta(minutes=30) for a, b in zip(got, got[1:]))


@pytest.mark.parametrize("cron, spring, fall", [
    ("30 1-3 * * *", ["01:30", "03:00", "03:30"], ["01:30", "02:30", "03:30"]),  # a range: fixed-time
    ("15,45 2 * * *", ["03:00"], ["02:15", "02:45"]),  # a list: fixed-time
    ("*/30 2 * * *", [], ["02:00", "02:30", "02:00", "02:30"]),  # a minute starting with *: wildcard
])
def test_a_job_is_wildcard_only_when_its_minute_or_hour_field_starts_with_a_star(cron, spring, fall):
    """Debian cron's rule, as schedules.md states it: ranges and lists are fixed-time."""
    timing = Timing(cron, None, "Europe/Paris")
    for day, expected in ((31, spring), (27, fall)):
        month = 3 if day == 31 else 10
        got = slots(timing, paris(2030, month, day - 1, 23, 0), paris(2030, month, day, 4, 0) - timedelta(minutes=1))
        assert [f"{s.astimezone(PARIS):%H:%M}" for s in got] == expected, (cron, day)


def test_a_utc_schedule_ignores_dst():
    hourly = Timing("0 * * * *", None, "UTC")
    got = slots(hourly, datetime(2030, 10, 27, 0, 0, tzinfo=UTC), datetime(2030, 10, 27, 4, 0, tzinfo=UTC))
    assert len(got) == 4


def test_intervals_are_aligned_to_the_epoch_and_ignore_time_zones():
    every_7 = Timing(None, 7 * 60_000, "Europe/Paris")
    got = slots(every_7, datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 1, 1, 0, tzinfo=UTC))
    assert all(int(s.timestamp()) % 420 == 0 for s in got)
    assert all(b - a == timedelta(minutes=7) for a, b in zip(got, got[1:]))


# -- what one scheduler pass fires ---------------------------------------------------------

MINUTELY = Timing("* * * * *", None, "UTC")
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def test_first_sight_fires_nothing_and_starts_at_the_next_slot():
    got = plan(MINUTELY, None, T0 + timedelta(seconds=30), "run_once", 60_000)
    assert got.fire == [] and got.next_run_at == T0 + timedelta(minutes=1)


def test_an_on_time_slot_fires_and_the_next_one_is_after_now():
    got = plan(MINUTELY, T0, T0 + timedelta(seconds=5), "skip", 60_000)
    assert got.fire == [T0] and got.skipped == 0 and got.next_run_at == T0 + timedelta(minutes=1)


def test_not_yet_due_fires_nothing():
    got = plan(MINUTELY, T0 + timedelta(minutes=1), T0, "run_once", 60_000)
    assert got.fire == [] and got.next_run_at == T0 + timedelta(minutes=1)


@pytest.mark.parametrize("missed, fire, skipped", [
    ("run_once", [T0 + timedelta(minutes=59)], 59),
    ("skip", [], 60),
])
def test_after_downtime_the_missed_policy_decides_the_late_slots(missed, fire, skipped):
    # Nobody ran from T0 to T0+59m30s with a 10 s grace: the 60 slots T0..T0+59m are late.
    now = T0 + timedelta(minutes=59, seconds=30)
    got = plan(MINUTELY, T0, now, missed, 10_000)
    assert got.fire == fire and got.skipped == skipped
    assert got.next_run_at == T0 + timedelta(minutes=60)


def test_late_slots_are_not_run_when_an_on_time_slot_is():
    got = plan(MINUTELY, T0, T0 + timedelta(minutes=10, seconds=5), "run_once", 30_000)
    assert got.fire == [T0 + timedelta(minutes=10)] and got.skipped == 10


def test_a_long_outage_is_bounded():
    got = plan(MINUTELY, T0, T0 + timedelta(days=30), "run_once", 0)
    assert got.fire == [T0 + timedelta(days=30)]


# -- declarations --------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({}, "exactly one of cron= or every="),
    ({"cron": "* * * * *", "every": timedelta(minutes=1)}, "exactly one"),
    ({"cron": "61 * * * *"}, "cron='61 * * * *'"),
    ({"cron": "* * * *"}, "five fields"),
    ({"every": timedelta(milliseconds=10)}, "at least one second"),
    ({"every": 60}, "timedelta"),
    ({"every": timedelta(days=3_000_000)}, "at most 100 years"),  # its first slot overflowed datetime at sync
    ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "IANA"),
    ({"cron": "* * * * *", "missed": "catch_up"}, "run_once, skip"),
    ({"cron": "* * * * *", "args": [object()]}, "args"),
    # longer than the row's columns: PostgreSQL refused the sync of every schedule
    ({"cron": ",".join(map(str, range(60))) + " * * * *"}, "at most 120 characters"),
    ({"cron": "* * * * *", "queue": "q" * 101}, "queue: must be at most 100 characters"),
    # the row refused it at sync ("must be either True or False"), and no schedule synced
    ({"cron": "* * * * *", "enabled": "no"}, "enabled='no': must be True or False"),
])
def test_bad_declarations_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("*", r"\*").replace("(", r"\(")):
        Schedule(**kwargs)


@pytest.mark.parametrize("declared", [
    ["0 3 * * *", "0 4 * * *"],
    [Schedule(cron="0 3 * * *"), Schedule(every=timedelta(hours=1))],
    [Schedule(cron="0 3 * * *", name="twice"), Schedule(cron="0 4 * * *", name="twice")],
])
def test_several_schedules_of_one_task_need_their_own_names_at_import(declared):
    """Both were named after the task: the module imported, and then the sync of every
    schedule was refused (a worker logged it, the checks said boson.E007)."""
    with pytest.raises(ValueError, match="its own name="):
        as_schedules(declared)
    assert len(as_schedules([Schedule(cron="0 3 * * *"), Schedule(cron="0 4 * * *", name="late")])) == 2


def test_on_time_slots_beyond_one_pass_fire_in_the_next_pass():
    """A long grace (catch up a week of minutes) may leave more on-time slots than one
    pass fires: the rest vanished, not fired nor counted as skipped."""
    every_minute, grace_ms = Timing(None, 60_000, "UTC"), 30 * 86_400_000
    now = T0 + timedelta(minutes=12_000)
    first = plan(every_minute, T0, now, "skip", grace_ms)
    assert len(first.fire) == MAX_SCAN and first.skipped == 0
    assert first.next_run_at == T0 + timedelta(minutes=MAX_SCAN), "the first slot not fired yet"
    second = plan(every_minute, first.next_run_at, now, "skip", grace_ms)
    assert len(second.fire) == 12_001 - MAX_SCAN and second.fire[-1] == now
    assert second.next_run_at == now + timedelta(minutes=1)
