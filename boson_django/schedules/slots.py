"""Slot arithmetic, pure: the instants a schedule fires at and what a late scheduler does.

A *slot* is one instant (aware UTC) at which a schedule is due. Cron slots follow the
wall clock of the schedule's time zone with Debian cron's DST rules (via cronsim): in a
spring-forward gap a fixed-time slot moves to the first instant after the gap, a
wildcard slot (minute or hour field starting with ``*``) that falls in it does not exist;
in a fall-back overlap a fixed-time slot fires once (the first occurrence), a wildcard
slot fires in both. Interval
slots are ``epoch + k * every`` and know nothing of time zones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: At most this many late slots are counted one by one; more are counted as this many.
MAX_SCAN = 10_000


@dataclass(frozen=True)
class Timing:
    cron: str | None
    every_ms: int | None
    timezone: str = "UTC"

    def next_after(self, at: datetime) -> datetime | None:
        """The first slot strictly after ``at`` (None: a cron that never fires again)."""
        if self.every_ms:
            step = timedelta(milliseconds=self.every_ms)
            return EPOCH + ((at - EPOCH) // step + 1) * step
        from boson_django.schedules.spec import cronsim, zone

        # Started inside the repeated hour of a fall-back (fold=1), cronsim yields the first
        # occurrence of a fixed time there -- up to an hour before ``at``: skip those.
        for found in cronsim()[0](self.cron or "", at.astimezone(zone(self.timezone))):
            if found.astimezone(timezone.utc) > at:
                return found.astimezone(timezone.utc)
        return None


@dataclass
class Plan:
    """What one scheduler pass does for one schedule."""

    fire: list[datetime] = field(default_factory=list)
    skipped: int = 0
    next_run_at: datetime | None = None


def plan(timing: Timing, next_run_at: datetime | None, now: datetime, missed: str, grace_ms: int) -> Plan:
    """The slots to enqueue now, the late ones given up, and the next slot after ``now``.

    Slots in ``[next_run_at, now]`` are due. Those at most ``grace_ms`` old are on time
    and each fires: at most ``MAX_SCAN`` a pass, the next pass goes on from the first
    left. If none is on time but some are late (the scheduler was down),
    ``missed="run_once"`` fires the latest late slot once; ``"skip"`` fires none.
    """
    after_now = timing.next_after(now)
    if next_run_at is None or next_run_at > now:
        return Plan(next_run_at=after_now if next_run_at is None else next_run_at)
    cutoff = now - timedelta(milliseconds=grace_ms)
    late, last_late = _late_slots(timing, next_run_at, cutoff)
    on_time = _slots_between(timing, max(next_run_at, cutoff), now)
    left = timing.next_after(on_time[-1]) if len(on_time) == MAX_SCAN else None
    if left is not None and left <= now:
        return Plan(fire=on_time, skipped=late, next_run_at=left)
    if on_time or last_late is None or missed != "run_once":
        return Plan(fire=on_time, skipped=late, next_run_at=after_now)
    return Plan(fire=[last_late], skipped=late - 1, next_run_at=after_now)


def _late_slots(timing: Timing, first: datetime, cutoff: datetime) -> tuple[int, datetime | None]:
    """How many slots lie in ``[first, cutoff)``, and the latest of them."""
    count, last, slot = 0, None, first
    while slot is not None and slot < cutoff and count < MAX_SCAN:
        count, last = count + 1, slot
        slot = timing.next_after(slot)
    if slot is not None and slot < cutoff:
        last = _latest_before(timing, cutoff)
    return count, last


def _latest_before(timing: Timing, cutoff: datetime) -> datetime | None:
    """The last slot before ``cutoff``, found by stepping back from it in widening windows."""
    span = timedelta(minutes=1)
    while span < timedelta(days=3660):
        slot = timing.next_after(cutoff - span)
        if slot is not None and slot < cutoff:
            while (following := timing.next_after(slot)) is not None and following < cutoff:
                slot = following
            return slot
        span *= 4
    return None


def _slots_between(timing: Timing, start: datetime, end: datetime) -> list[datetime]:
    """Slots in ``[start, end]`` (``start`` included when it is a slot)."""
    found: list[datetime] = []
    slot = timing.next_after(start - timedelta(microseconds=1))
    while slot is not None and slot <= end and len(found) < MAX_SCAN:
        found.append(slot)
        slot = timing.next_after(slot)
    return found
