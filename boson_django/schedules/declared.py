"""What code and settings declare, and the sync that makes one ``boson_schedule`` row of each.

Sync writes the definition (task, timing, arguments, missed policy) and never the
operator's switch (``enabled``). A row no longer declared anywhere is kept for its
history with ``declared=False`` and never fires. Changing a schedule's timing moves its
next run to the first new slot after now; the slots it already fired stay fired.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from boson_django import clock, conf, registry, validation
from boson_django.schedules.slots import Timing
from boson_django.schedules.spec import Schedule, from_setting
from boson_django import database

log = logging.getLogger("boson_django.schedules")

DEFINITION = ("task", "cron", "every_ms", "timezone", "missed", "grace_ms", "args", "kwargs", "queue", "priority", "source")
TIMING = ("cron", "every_ms", "timezone")


def declared() -> dict[str, tuple[Schedule, str]]:
    """Every declared schedule by name, with where it was declared ("code" or "settings")."""
    found: dict[str, tuple[Schedule, str]] = {}
    for task_name in registry.names():
        specs = getattr(registry.get(task_name), "schedule", None) or ()
        for spec in specs:
            _add(found, spec.named(task_name), "code")
    for name, entry in (conf.get().SCHEDULES or {}).items():
        _add(found, from_setting(name, entry), "settings")
    return found


def _add(found: dict[str, tuple[Schedule, str]], spec: Schedule, source: str) -> None:
    if spec.name is None:
        raise ImproperlyConfigured(f"a schedule of {spec.task!r} from {source} has no name")
    if spec.name in found:
        raise ImproperlyConfigured(
            f"schedule {spec.name!r} is declared twice; give each schedule of a task its own name="
        )
    found[spec.name] = (spec, source)


def definition(spec: Schedule, source: str) -> dict[str, Any]:
    return {
        "task": spec.task, "cron": spec.cron or "", "every_ms": spec.every_ms, "timezone": spec.timezone,
        "missed": spec.missed, "grace_ms": spec.grace_ms, "args": _as_stored(list(spec.args), "args"),
        "kwargs": _as_stored(dict(spec.kwargs), "kwargs"),
        "queue": spec.queue, "priority": spec.priority, "source": source,
    }


def _as_stored(value: Any, field: str) -> Any:
    """``value`` as the row's JSON column gives it back (tuples become lists), so that a
    declaration compares equal to the row it was written to."""
    return json.loads(validation.json_text(value, field))


def timing_of(row: Any) -> Timing:
    return Timing(row.cron or None, row.every_ms, row.timezone)


def sync_schedules(*, using: str | None = None) -> int:
    """Upsert one row per declared schedule; returns how many rows changed.

    Reads the rows first without a lock: when they already say what is declared (every
    view of the admin's schedule list, every pass of the scheduler) nothing is
    locked or written -- on SQLite the locking pass takes the database's write lock.
    """
    from boson_django.models import StoredSchedule

    using = database.alias(using)
    declarations = declared()
    if _in_sync(declarations, {r.name: r for r in StoredSchedule.objects.using(using)}):
        return 0
    return _write(declarations, using=using)


def _in_sync(declarations: dict[str, tuple[Schedule, str]], rows: dict[str, Any]) -> bool:
    if any(r.declared and n not in declarations for n, r in rows.items()):
        return False
    return all(
        name in rows and _matches(rows[name], definition(spec, source)) for name, (spec, source) in declarations.items()
    )


def _matches(row: Any, values: dict[str, Any]) -> bool:
    return row.declared and all(getattr(row, k) == v for k, v in values.items())


@database.store_transaction
def _write(declarations: dict[str, tuple[Schedule, str]], *, using: str) -> int:
    """The locking pass: locks every schedule row (PostgreSQL), so two workers syncing
    at once apply one after the other; each row is compared again under its lock."""
    from boson_django.models import StoredSchedule

    now = clock.now(using)
    rows = {r.name: r for r in StoredSchedule.objects.using(using).select_for_update().order_by("name")}
    changed = 0
    for name, (spec, source) in declarations.items():
        row = rows.get(name)
        if row is None:
            changed += _create(name, spec, source, now, using)
        else:
            changed += _update(row, definition(spec, source), now, using)
    gone = [n for n, r in rows.items() if n not in declarations and r.declared]
    if gone:
        StoredSchedule.objects.using(using).filter(name__in=gone).update(declared=False, synced_at=now)
        log.info("boson: schedules no longer declared (kept, never fire): %s", ", ".join(gone))
    return changed + len(gone)


def _create(name: str, spec: Schedule, source: str, now: datetime, using: str) -> int:
    from boson_django.models import StoredSchedule

    values = definition(spec, source)
    first = timing_of(StoredSchedule(**values)).next_after(now)
    made = StoredSchedule.objects.using(using).bulk_create(
        [StoredSchedule(name=name, enabled=spec.enabled, next_run_at=first, synced_at=now, **values)], ignore_conflicts=True
    )
    log.info("boson: schedule %s created (%s), first run %s", name, spec.describe(), first)
    return len(made)


def _update(row: Any, values: dict[str, Any], now: datetime, using: str) -> int:
    if _matches(row, values):
        return 0
    retimed = not row.declared or any(getattr(row, k) != values[k] for k in TIMING)
    for key, value in values.items():
        setattr(row, key, value)
    row.declared, row.synced_at = True, now
    if retimed:
        row.next_run_at = timing_of(row).next_after(now)
    row.save(using=using, update_fields=[*values, "declared", "synced_at", "next_run_at"])
    return 1
