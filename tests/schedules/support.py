"""Scheduler workers on threads, each with its own connection, stepping a frozen store clock."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta

from django.db import connection

from boson_django import clock, services
from boson_django.models import Job, ScheduleSlot
from boson_django.schedules import scheduler
from boson_django.schedules.declared import declared
from boson_django.schedules.slots import Timing

from tests.factories import NOOP

JOIN_TIMEOUT_S = 600

SIM_SCHEDULES = {
    "every-minute": {"task": NOOP, "cron": "* * * * *"},
    "paris-5": {"task": NOOP, "cron": "*/5 * * * *", "timezone": "Europe/Paris", "queue": "reports"},
    "hourly-skip": {"task": NOOP, "cron": "0 * * * *", "missed": "skip"},
    "every-7m": {"task": NOOP, "every": timedelta(minutes=7), "args": [7]},
}


def scheduler_tick(worker: str, lease_ms: int) -> bool:
    """What a worker's sweeper does for the schedule duty; True if it held the duty."""
    if not services.claim_duty(scheduler.DUTY, worker, lease_ms):
        return False
    scheduler.run_due(using="default", holder=worker)
    return True


class Simulation:
    """``count`` workers step the store clock together: each step every live worker ticks
    once, then one barrier action advances the clock by ``step_ms``."""

    def __init__(self, count: int, steps: int, step_ms: int, lease_ms: int, ignore_duty: bool = False):
        self.count, self.steps, self.step_ms, self.lease_ms = count, steps, step_ms, lease_ms
        self.ignore_duty = ignore_duty
        self.killed: dict[int, int] = {}  # worker -> step at which it dies
        self.held: list[tuple[int, str, datetime]] = []  # (step, holder, store time) of each duty tick
        self.lock = threading.Lock()
        self.failures: list[BaseException] = []
        self.barrier = threading.Barrier(count, action=self._advance)

    def _advance(self) -> None:
        clock.advance(self.step_ms)

    def _body(self, i: int) -> None:
        name = f"worker-{i}"
        try:
            for step in range(self.steps):
                alive = self.killed.get(i, self.steps) > step
                if alive:
                    self._tick(step, name)
                self.barrier.wait(timeout=JOIN_TIMEOUT_S)
        except BaseException as exc:  # noqa: BLE001 -- reported by run()
            self.failures.append(exc)
            self.barrier.abort()
        finally:
            connection.close()

    def _tick(self, step: int, name: str) -> None:
        if self.ignore_duty:
            scheduler.run_due(using="default", holder=name)
            return
        if scheduler_tick(name, self.lease_ms):
            with self.lock:
                self.held.append((step, name, clock.now()))

    def run(self) -> None:
        threads = [threading.Thread(target=self._body, args=(i,), name=f"sched-{i}") for i in range(self.count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
        assert not any(t.is_alive() for t in threads), "a scheduler thread did not finish"
        if self.failures:
            raise self.failures[0]


def expected_slots(start: datetime, end: datetime) -> dict[str, list[datetime]]:
    """Every slot in (start, end] of each declared schedule, from the pure slot arithmetic."""
    found: dict[str, list[datetime]] = {}
    for name, (spec, _source) in declared().items():
        timing, at, slots = Timing(spec.cron, spec.every_ms, spec.timezone), start, []
        while (at := timing.next_after(at)) is not None and at <= end:
            slots.append(at)
        found[name] = slots
    return found


def assert_each_slot_enqueued_once(expected: dict[str, list[datetime]]) -> None:
    for name, slots in expected.items():
        fired = Counter(ScheduleSlot.objects.filter(schedule=name).values_list("slot_at", flat=True))
        assert set(fired.values()) <= {1}
        assert sorted(fired) == slots, f"{name}: {len(fired)} slots fired, {len(slots)} expected"
        jobs = Job.objects.filter(meta__schedule=name)
        assert jobs.count() == len(slots), f"{name}: {jobs.count()} jobs for {len(slots)} slots"
        linked = set(ScheduleSlot.objects.filter(schedule=name).values_list("job_id", flat=True))
        assert linked == set(jobs.values_list("id", flat=True))
