"""Two, then eight workers run schedulers for 1,000 simulated minutes: one job per slot."""

from __future__ import annotations

from datetime import timedelta

import pytest

from boson_django import clock
from boson_django.models import Duty, ScheduleSlot
from boson_django.schedules import scheduler
from tests.conftest import EPOCH
from tests.schedules.support import Simulation, assert_each_slot_enqueued_once, expected_slots

MINUTE_MS = 60_000
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("workers", [2, 8])
def test_workers_enqueue_exactly_one_job_per_slot_over_1000_minutes(synced, workers):
    sim = Simulation(workers, steps=1001, step_ms=MINUTE_MS, lease_ms=90_000)
    sim.run()

    expected = expected_slots(EPOCH, EPOCH + timedelta(minutes=1000))
    assert len(expected["every-minute"]) == 1000 and len(expected["paris-5"]) == 200
    assert_each_slot_enqueued_once(expected)
    holders = {holder for _step, holder, _at in sim.held}
    assert len(holders) == 1, "the duty stayed with its first holder: it renews every tick"
    assert set(ScheduleSlot.objects.values_list("holder", flat=True)) == holders


def test_eight_schedulers_ignoring_the_duty_still_enqueue_once_per_slot(synced):
    """No duty at all -- every worker fires every tick, as stale leaders would: the unique
    key on (schedule, slot) alone keeps it to one job per slot."""
    sim = Simulation(8, steps=301, step_ms=MINUTE_MS, lease_ms=90_000, ignore_duty=True)
    sim.run()

    assert_each_slot_enqueued_once(expected_slots(EPOCH, EPOCH + timedelta(minutes=300)))


def test_a_killed_schedulers_duty_moves_within_one_lease_and_no_slot_is_lost_or_doubled(synced):
    step_ms, lease_ms = 10_000, 30_000
    sim = Simulation(3, steps=6 * 100 + 1, step_ms=step_ms, lease_ms=lease_ms)
    first = _holder_after_one_tick(sim)
    sim.killed = {int(first.rsplit("-", 1)[1]): 240}  # dies at minute 40
    sim.run()

    died_at = EPOCH + timedelta(milliseconds=239 * step_ms)  # its last tick
    after = [(at, holder) for _step, holder, at in sim.held if holder != first]
    takeover_at, successor = after[0]
    assert takeover_at > died_at and takeover_at - died_at <= timedelta(milliseconds=lease_ms + step_ms)
    assert Duty.objects.get(name=scheduler.DUTY).holder == successor
    assert_each_slot_enqueued_once(expected_slots(EPOCH, EPOCH + timedelta(minutes=100)))
    gap = ScheduleSlot.objects.filter(slot_at__gt=died_at, slot_at__lt=takeover_at)
    assert gap.exists(), "a slot fell due while nobody held the duty"
    assert {s.holder for s in gap} == {successor}
    assert all(s.fired_at - s.slot_at <= timedelta(milliseconds=lease_ms + step_ms) for s in gap)


def _holder_after_one_tick(sim: Simulation) -> str:
    """Run the first tick alone to learn who takes the duty, then rewind the clock."""
    probe = Simulation(sim.count, steps=1, step_ms=0, lease_ms=sim.lease_ms)
    probe.run()
    clock.freeze(EPOCH)
    (holder,) = {h for _s, h, _at in probe.held}
    return holder
