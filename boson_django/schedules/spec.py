"""A schedule declaration: which task runs by itself, when, and with which arguments.

Declared next to the task (``@task(schedule=...)``) or in ``BOSON["SCHEDULES"]``; both
become rows of ``boson_schedule`` (see :mod:`boson_django.schedules.sync`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ImproperlyConfigured

from boson_django import validation

RUN_ONCE = "run_once"
SKIP = "skip"
MISSED_POLICIES = (RUN_ONCE, SKIP)
DEFAULT_GRACE_MS = 60_000


@dataclass(frozen=True, eq=False)
class Schedule:
    """When a task runs by itself.

    Exactly one of ``cron`` (five fields, evaluated in ``timezone``) or ``every`` (a
    fixed ``timedelta``, aligned to the Unix epoch) is given. ``missed`` says what
    happens to slots the scheduler saw more than ``grace_ms`` late (after downtime):
    ``"run_once"`` runs the latest of them once, ``"skip"`` runs none.
    """

    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"
    missed: str = RUN_ONCE
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    queue: str | None = None
    priority: int | None = None
    grace_ms: int = DEFAULT_GRACE_MS
    enabled: bool = True
    task: str | None = None

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise ValueError("Schedule: give exactly one of cron= or every=")
        if self.cron is not None:
            check_cron(self.cron)
        else:
            every_ms(self.every)
        zone(self.timezone)
        if self.missed not in MISSED_POLICIES:
            raise ValueError(f"Schedule missed={self.missed!r}: must be one of {', '.join(MISSED_POLICIES)}")
        if not isinstance(self.args, (list, tuple)) or not isinstance(self.kwargs, Mapping):
            raise ValueError("Schedule args= must be a list or tuple and kwargs= a dict")
        validation.json_text(list(self.args), "args")
        validation.json_text(dict(self.kwargs), "kwargs")
        validation.whole(self.grace_ms, "grace_ms")
        if not isinstance(self.enabled, bool):  # the row's column refused it at sync, stopping every schedule
            raise ValueError(f"Schedule enabled={self.enabled!r}: must be True or False")
        if self.priority is not None:
            validation.priority(self.priority)
        # The row's columns bound these: a longer value passed here and then failed the
        # sync of every schedule on PostgreSQL (a queue is a job's queue: validation.MAX_NAME).
        validation.optional_name(self.name, "name", max_len=validation.MAX_SCHEDULE_NAME)
        validation.optional_name(self.queue, "queue", max_len=validation.MAX_NAME)
        validation.optional_name(self.task, "task", max_len=validation.MAX_TASK)

    @property
    def every_ms(self) -> int | None:
        return None if self.every is None else every_ms(self.every)

    def named(self, task: str, name: str | None = None) -> Schedule:
        """This declaration bound to ``task`` (and its row name)."""
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__}
        fields.update(task=task, name=self.name or name or task)
        return Schedule(**fields)

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron!r} ({self.timezone})"
        return f"every {self.every}"


def check_cron(expr: Any) -> str:
    if not isinstance(expr, str) or len(expr.split()) != 5:
        raise ValueError(f"Schedule cron={expr!r}: must be five fields (minute hour day month weekday)")
    if len(expr) > validation.MAX_CRON:
        raise ValueError(f"Schedule cron={expr!r}: must be at most {validation.MAX_CRON} characters (use ranges: 0-59)")
    CronSim, CronSimError = cronsim()
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=timezone.utc))
    except CronSimError as exc:
        raise ValueError(f"Schedule cron={expr!r}: {exc}") from None
    return expr


def cronsim() -> tuple[Any, Any]:
    """cronsim's CronSim and CronSimError; cron schedules need the ``schedules`` extra."""
    try:
        from cronsim import CronSim, CronSimError
    except ImportError:  # pragma: no cover -- the extra is installed in the test environments
        raise ImproperlyConfigured(
            "cron schedules need cronsim: pip install 'boson-django[schedules]' (or every= for intervals)"
        ) from None
    return CronSim, CronSimError


def every_ms(every: Any) -> int:
    if not isinstance(every, timedelta):
        raise ValueError(f"Schedule every={every!r}: must be a datetime.timedelta")
    ms = every // timedelta(milliseconds=1)
    if ms < 1_000 or every % timedelta(milliseconds=1):
        raise ValueError(f"Schedule every={every!r}: must be whole milliseconds, at least one second")
    if ms > validation.MAX_MS:  # as every duration: longer overflowed datetime at sync, stopping every schedule
        raise ValueError(f"Schedule every={every!r}: must be at most 100 years")
    return int(ms)


def zone(name: Any) -> ZoneInfo:
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"Schedule timezone={name!r}: not an IANA time zone name") from None


def from_setting(name: str, entry: Any) -> Schedule:
    """One ``BOSON["SCHEDULES"]`` entry (a dict with ``task`` and the Schedule fields)."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"BOSON['SCHEDULES'][{name!r}] must be a dict, got {type(entry).__name__}")
    unknown = set(entry) - set(Schedule.__dataclass_fields__) - {"task"}
    if unknown:
        raise ValueError(f"BOSON['SCHEDULES'][{name!r}] has unknown keys: {', '.join(sorted(unknown))}")
    if not entry.get("task"):
        raise ValueError(f"BOSON['SCHEDULES'][{name!r}] needs a 'task' (the task's module path)")
    return Schedule(**{**entry, "name": name})


def as_schedules(value: Any) -> tuple[Schedule, ...]:
    """``@task(schedule=...)``: a Schedule, a cron string, or a list of them."""
    if value is None:
        return ()
    items = value if isinstance(value, (list, tuple)) else [value]
    return _named_apart(tuple(Schedule(cron=item) if isinstance(item, str) else _schedule(item) for item in items))


def _named_apart(specs: tuple[Schedule, ...]) -> tuple[Schedule, ...]:
    """Refuse, when the module is imported, two schedules of one task that would share a
    row name (an unnamed one is named after the task): the sync refuses them all later."""
    names = [spec.name for spec in specs]
    if len(set(names)) < len(names):
        raise ValueError("schedule=: a task with several schedules must give each its own name=")
    return specs


def _schedule(item: Any) -> Schedule:
    if not isinstance(item, Schedule):
        raise ValueError(f"schedule=: expected a Schedule or a cron string, got {item!r}")
    return item


def check_setting(value: Mapping[str, Any]) -> str | None:
    """What is wrong with ``BOSON["SCHEDULES"]``, said plainly (for checks.py), or None."""
    from boson_django import registry

    for name, entry in value.items():
        try:
            validation.name(name, "name", max_len=validation.MAX_SCHEDULE_NAME)
            spec = from_setting(name, entry)
        except ValueError as exc:
            return f"entry {name!r}: {exc}"
        if not registry.is_registered(spec.task or ""):
            return f"entry {name!r}: task {spec.task!r} is not a registered task."
    return None
