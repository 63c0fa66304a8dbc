"""Checks of the ``BOSON`` setting, key by key from its declarations in
:mod:`boson_django.conf`, and of the modules of tasks and schedules it names."""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.utils import autoreload

from boson_django import conf, registry, validation


@checks.register("boson")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    raw = getattr(django_settings, "BOSON", None)
    if raw is not None and not isinstance(raw, dict):
        return [checks.Error(f"BOSON must be a dict, got {type(raw).__name__} {raw!r:.60}.", id="boson.E004")]
    user = conf.user_settings()
    problems: list[checks.CheckMessage] = []
    for key, value in user.items():
        if key not in conf.DEFAULTS:
            problems.append(_unknown_key(key))
            continue
        problem = _bad_value(key, value)
        if problem:
            problems.append(checks.Error(f"BOSON[{key!r}] {problem}", id="boson.E002"))
    problems.extend(_cross_checks())
    return problems


@checks.register("boson")
def check_task_modules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every module holding tasks imports. A worker imports them to learn which tasks may
    run; one that raises (a missing dependency: a cron schedule without cronsim, say)
    would leave every task and schedule declared in it unknown, reported only in the
    worker's log. As a check error it shows in ``check``, ``migrate`` and ``runserver``,
    and ``boson_worker`` does not start."""
    try:
        listed = conf.user_settings().get("TASK_MODULES")
        if listed is not None and _bad_value("TASK_MODULES", listed):
            return []  # check_settings names the entry that is not a module
        modules = registry.task_modules()
    except Exception:  # noqa: BLE001 -- a bad BOSON value: check_settings names it
        return []
    for module, optional in modules:
        try:
            # check_errors: an autoreloader (runserver's, boson_worker --reload) then
            # watches the file that failed, no module of which is left to watch.
            autoreload.check_errors(registry.import_tasks)(module, optional)
        except Exception as exc:  # noqa: BLE001 -- any error of the user's module, named
            return [_failed_import(module, exc)]
    return [*_schedule_names_taken_twice(), *_schedule_graces_under_a_hand_over()]


def _schedule_names_taken_twice() -> list[checks.CheckMessage]:
    """A schedule name declared twice (in code and in ``SCHEDULES``, say) can be seen only
    once every module of tasks is imported; the scheduler would refuse to sync any."""
    from boson_django.schedules.declared import declared

    try:
        declared()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="boson.E007")]
    except Exception:  # noqa: BLE001 -- a bad SCHEDULES entry: check_settings names it
        pass
    return []


def _schedule_graces_under_a_hand_over() -> list[checks.CheckMessage]:
    """The scheduler sees a slot up to a sweep interval late, and a duty hand-over later
    still: a ``grace_ms`` under that counts slots seen in normal running as missed (with
    ``missed="skip"`` and ``grace_ms=0`` a schedule never ran)."""
    from boson_django.schedules.declared import declared

    try:
        found, interval = declared(), conf.get().SWEEP_INTERVAL_MS
    except Exception:  # noqa: BLE001 -- a bad SCHEDULES entry or name: E002/E007 name it
        return []
    if _bad_value("SWEEP_INTERVAL_MS", interval):  # E002 names it
        return []
    hand_over = conf.duty_lease_ms(interval)
    return [
        checks.Warning(
            f"schedule {name!r} has grace_ms={spec.grace_ms}, less than a hand-over of the scheduler's duty "
            f"({hand_over} ms: three SWEEP_INTERVAL_MS): slots it sees in normal running count as missed "
            f"(missed={spec.missed!r}).",
            hint=f"Give it grace_ms={hand_over} or more (the default is one minute).", id="boson.W003",
        )
        for name, (spec, _source) in sorted(found.items()) if spec.grace_ms < hand_over
    ]


def _failed_import(module: str, exc: Exception) -> checks.CheckMessage:
    hint = "A worker cannot run the tasks or schedules it declares until it imports."
    if isinstance(exc, DatabaseError):
        # A query at the module's top level (a set_rate_limit beside the tasks, say) runs
        # when the checks import it -- before `migrate`, on a fresh database, too.
        hint += (
            " It queried the database while being imported, which runs before `migrate` "
            "(the system checks import it): move that query into a data migration, a "
            "deploy step or a function called at run time."
        )
    return checks.Error(
        f"importing {module!r}, a module of tasks, failed: {type(exc).__name__}: {exc}",
        hint=hint,
        id="boson.E005",
    )


def _unknown_key(key: str) -> checks.CheckMessage:
    close = difflib.get_close_matches(str(key).upper(), conf.DEFAULTS, n=1)
    hint = f"Did you mean {close[0]!r}?" if close else f"Known keys: {', '.join(conf.DEFAULTS)}"
    return checks.Error(f"BOSON has an unknown key {key!r}.", hint=hint, id="boson.E001")


def _bad_value(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for ``key`` under its declaration: its type, its
    minimum, the largest whole number the store takes, then the key's own ``check``."""
    kind, minimum = conf.RULES[key]
    if not _is_a(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join("None" if k is type(None) else k.__name__ for k in kind)
        return f"must be {names}, got {type(value).__name__} {value!r}."
    if minimum is not None and value < minimum:
        return f"must be >= {minimum}, got {value!r}."
    if kind is int:
        top, why = _maximum(key)
        if value > top:
            return f"must be <= {top} ({why}), got {value!r}."
    check = conf.SETTINGS[key].check
    if check is None:
        return None
    module, name = check.split(":")
    found: str | None = getattr(importlib.import_module(module), name)(value)
    return found


def _is_a(value: Any, kind: type | tuple[type, ...]) -> bool:
    """``isinstance``, but True and False are no numbers here."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _maximum(key: str) -> tuple[int, str]:
    """The largest value a whole-number setting may take, and why: past it an enqueue, a
    sweep or the worker's start fails with an error that does not name the setting."""
    if key == "SWEEP_INTERVAL_MS":
        intervals = conf.SWEEP_DUTY_INTERVALS
        return validation.MAX_MS // intervals, f"a sweep's duty lease of {intervals} intervals is at most 100 years"
    if key.endswith("_MS"):
        return validation.MAX_MS, "100 years"
    return validation.MAX_COUNT, "the store's 32-bit counts"


def _cross_checks() -> list[checks.CheckMessage]:
    user = conf.user_settings()
    if any(_bad_value(k, v) for k, v in user.items() if k in conf.DEFAULTS):
        return []
    effective = conf.get()
    problems: list[checks.CheckMessage] = []
    if effective.RETRY_BASE_MS > effective.RETRY_CAP_MS:
        problems.append(
            checks.Error("BOSON['RETRY_BASE_MS'] is larger than BOSON['RETRY_CAP_MS'].", id="boson.E003")
        )
    return [*problems, *_transaction_pooler_problems(user)]


def _transaction_pooler_problems(user: dict[str, Any]) -> list[checks.CheckMessage]:
    """Behind a pooler in transaction mode nothing may live in the session: prepared
    statements set True are refused (they would be looked for on a server connection
    that never prepared them, and the worker's session settings would leak)."""
    if user.get("POOLER") != conf.TRANSACTION_POOLER or user.get("PREPARED_STATEMENTS") is not True:
        return []
    return [checks.Error(
        "BOSON['PREPARED_STATEMENTS'] = True cannot work with BOSON['POOLER'] = 'transaction': a statement "
        "prepared in one transaction's server session is missing from the next one's, and the worker's session "
        "settings would leak to other clients.",
        hint="Remove BOSON['PREPARED_STATEMENTS'] (it is off behind a transaction pooler), or connect directly.",
        id="boson.E011",
    )]
