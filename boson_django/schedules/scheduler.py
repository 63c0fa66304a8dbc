"""The scheduler: run inside workers under the ``boson.schedule`` duty.

One enqueue per (schedule, slot) is a database constraint: :func:`fire_slot` inserts
the slot into ``boson_schedule_slot`` (unique on schedule and slot) and enqueues the job
in the same transaction only if that insert happened. A stale scheduler -- one whose
duty lapsed while it was paused -- that fires a slot already fired inserts nothing and
enqueues nothing. The duty only keeps the work from being done N times over; it is not
what makes it correct.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, transaction

from boson_django import clock, ids, registry
from boson_django.keys import unique_key_for
from boson_django.errors import InvalidEnvelope, StoreError
from boson_django.schedules import slots
from boson_django.schedules.declared import sync_schedules, timing_of
from boson_django import database
from boson_django.services import wakeups
from boson_django.services.enqueue import enqueue
from boson_django.services.types import Envelope

log = logging.getLogger("boson_django.schedules")

DUTY = "boson.schedule"
#: Fired slots kept per schedule (who fired each, which job); older ones are deleted.
KEEP_SLOTS = 10_000
#: The sync error last logged per alias: a refused sync is logged when it starts or changes.
_refused: dict[str, str] = {}


def run_due(limit: int = 100, *, using: str | None = None, holder: str = "") -> int:
    """The duty's body: sync the declarations, then tick every due schedule.

    Returns how many schedules were looked at (a full batch makes the sweeper call again).
    A schedule that cannot enqueue (its task is gone, say) is logged and moved to its
    next slot, so one broken schedule never stops the others.
    """
    using = database.alias(using)
    _sync(using)
    names = due_names(limit, using)
    for name in names:
        try:
            tick(name, using=using, holder=holder)
        except (StoreError, ValueError) as exc:
            log.error("boson: schedule %s could not enqueue: %s", name, exc)
            postpone(name, using=using)
    return len(names)


def _sync(using: str) -> None:
    """Sync on every pass, not once per process: another process on older code or settings
    (a web process's admin list in a rolling deploy) may have synced its declarations over
    these. A sync with nothing to change is one read; a refused one keeps the rows firing."""
    try:
        sync_schedules(using=using)
    except (ImproperlyConfigured, ValueError) as exc:  # reported by checks too
        if _refused.get(using) != str(exc):
            log.error("boson: schedules not synced: %s", exc)
        _refused[using] = str(exc)
    else:
        _refused.pop(using, None)


def due_names(limit: int, using: str) -> list[str]:
    from boson_django.models import StoredSchedule

    now = clock.now(using)
    found = StoredSchedule.objects.using(using).filter(enabled=True, declared=True, next_run_at__lte=now)
    return list(found.order_by("next_run_at", "name").values_list("name", flat=True)[:limit])


@database.store_transaction
def tick(name: str, *, using: str | None = None, holder: str = "") -> list[str]:
    """Fire the due slots of one schedule (its missed policy decides late ones).

    Locks the schedule row; a schedule disabled, undeclared or not yet due does nothing.
    Returns the ids of the jobs enqueued. Idempotent per slot: see :func:`fire_slot`.
    """
    from boson_django.models import StoredSchedule

    using = database.alias(using)
    row = StoredSchedule.objects.using(using).select_for_update().filter(name=name, enabled=True, declared=True).first()
    if row is None:
        return []
    now = clock.now(using)
    plan = slots.plan(timing_of(row), row.next_run_at, now, row.missed, row.grace_ms)
    if plan.next_run_at == row.next_run_at and not plan.fire:
        return []
    fired = [job for slot in plan.fire if (job := fire_slot(row, slot, now=now, using=using, holder=holder))]
    if plan.skipped:
        log.warning("boson: schedule %s skipped %d late slot(s) (missed=%s)", name, plan.skipped, row.missed)
    row.next_run_at = plan.next_run_at
    row.skipped_slots += plan.skipped
    if plan.fire:
        row.last_slot_at = plan.fire[-1]
        _forget_old_slots(name, using)
    if fired:
        row.last_run_at, row.last_job_id = now, fired[-1]
    row.save(using=using, update_fields=["next_run_at", "skipped_slots", "last_slot_at", "last_run_at", "last_job_id"])
    return fired


def fire_slot(row: Any, slot: datetime, *, now: datetime, using: str, holder: str = "") -> str | None:
    """Record ``slot`` of schedule ``row`` and enqueue its job -- or, if the slot was
    already recorded, do nothing and return None. Joins the caller's transaction."""
    job_id = ids.new_id()
    with transaction.atomic(using=using):
        if not _record_slot(row.name, slot, job_id, now, holder, using):
            log.info("boson: schedule %s slot %s already fired; not enqueued again", row.name, slot.isoformat())
            return None
        (result,) = enqueue([_envelope(row, slot, job_id)], using=using)
        if result.id != job_id:  # the task's own unique key is held by a live job
            _relink_slot(row.name, slot, result.id, using)
    _wake(row.queue, using)
    log.info("boson: schedule %s fired slot %s -> job %s", row.name, slot.isoformat(), result.id)
    return result.id


def _envelope(row: Any, slot: datetime | None, job_id: str) -> Envelope:
    meta = {"schedule": row.name}
    if slot is not None:
        meta["slot"] = slot.isoformat()
    return Envelope(
        id=job_id, task=row.task, args=list(row.args), kwargs=dict(row.kwargs), queue=row.queue,
        priority=row.priority, unique_key=_unique_key(row), meta=meta,
    )


def _unique_key(row: Any) -> str | None:
    """The key ``enqueue()`` of the task gives the schedule's arguments; None for a task
    that is gone (enqueue then refuses its name). A key function that raises is bad input
    (``InvalidEnvelope``): the scheduler logs and postpones it, the admin's "run now" says why."""
    try:
        return unique_key_for(registry.get(row.task), row.args, row.kwargs)
    except Exception as exc:  # a schedule that cannot enqueue is logged and postponed, not fatal
        raise InvalidEnvelope("unique_key", f"{row.task}'s failed on the schedule's arguments: {exc!r}") from exc


def _record_slot(name: str, slot: datetime, job_id: str, now: datetime, holder: str, using: str) -> bool:
    connection = database.conn(using)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO boson_schedule_slot (schedule, slot_at, job_id, fired_at, holder) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (schedule, slot_at) DO NOTHING RETURNING id",
            [name, database.dt_param(connection, slot), job_id, database.dt_param(connection, now), holder[:255]],
        )
        return cursor.fetchone() is not None


def _relink_slot(name: str, slot: datetime, job_id: str, using: str) -> None:
    from boson_django.models import ScheduleSlot

    ScheduleSlot.objects.using(using).filter(schedule=name, slot_at=slot).update(job_id=job_id)


def _forget_old_slots(name: str, using: str) -> None:
    """Keep the latest ``KEEP_SLOTS`` slots of a schedule, so its table stays bounded.

    Safe for once-per-slot: every kept or deleted slot is at or before now, and a pass
    fires only slots from ``next_run_at`` on, which is after now once a pass has run.
    Both queries walk the (schedule, slot) unique index.
    """
    from boson_django.models import ScheduleSlot

    slots = ScheduleSlot.objects.using(using).filter(schedule=name)
    oldest_kept = slots.order_by("-slot_at").values_list("slot_at", flat=True)[KEEP_SLOTS - 1:KEEP_SLOTS]
    if oldest_kept:
        slots.filter(slot_at__lt=oldest_kept[0]).delete()


def _wake(queue: str | None, using: str) -> None:
    try:
        wakeups.notify_at_commit([queue or wakeups.ANY_QUEUE], using)
    except DatabaseError:  # pragma: no cover -- a wake-up is only latency
        log.debug("boson: NOTIFY after a schedule fired failed", exc_info=True)


@database.store_transaction
def postpone(name: str, *, using: str | None = None) -> None:
    """Move a schedule that failed to enqueue to its next slot after now; the due slots it
    gives up count as skipped, as late ones do (the admin's "skipped" column)."""
    from boson_django.models import StoredSchedule

    row = StoredSchedule.objects.using(using).select_for_update().filter(name=name).first()
    if row is not None:
        now, timing = clock.now(using), timing_of(row)
        given_up = slots.plan(timing, row.next_run_at, now, row.missed, row.grace_ms)
        row.skipped_slots += len(given_up.fire) + given_up.skipped
        row.next_run_at = timing.next_after(now)
        row.save(using=using, update_fields=["next_run_at", "skipped_slots"])


@database.store_transaction
def run_now(name: str, *, using: str | None = None) -> str:
    """Enqueue the schedule's job at once (the admin's "run now"); slots are untouched.

    Works on a disabled schedule too. Returns the job id (the live holder's id when the
    task's own unique key is taken). Raises ``StoredSchedule.DoesNotExist`` for an unknown name.
    """
    from boson_django.models import StoredSchedule

    row = StoredSchedule.objects.using(using).select_for_update().get(name=name)
    now = clock.now(using)
    (result,) = enqueue([_envelope(row, None, ids.new_id())], using=using)
    row.last_run_at, row.last_job_id = now, result.id
    row.save(using=using, update_fields=["last_run_at", "last_job_id"])
    _wake(row.queue, database.alias(using))
    log.info("boson: schedule %s run now -> job %s", name, result.id)
    return result.id


@database.store_transaction
def set_enabled(name: str, enabled: bool, *, using: str | None = None) -> bool:
    """Enable or disable a schedule; returns False if it already was.

    Enabling starts again from the next slot after now: slots that passed while it was
    disabled were not missed, they were switched off.
    """
    from boson_django.models import StoredSchedule

    row = StoredSchedule.objects.using(using).select_for_update().get(name=name)
    if row.enabled == enabled:
        return False
    row.enabled = enabled
    if enabled:
        row.next_run_at = timing_of(row).next_after(clock.now(using))
    row.save(using=using, update_fields=["enabled", "next_run_at"])
    log.info("boson: schedule %s %s", name, "enabled" if enabled else "disabled")
    return True


def forget_sync() -> None:
    """Forget the refused syncs this process logged, so the next one is logged (tests)."""
    _refused.clear()
