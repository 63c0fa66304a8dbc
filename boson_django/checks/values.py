"""The rules of ``BOSON`` values beyond their type and minimum: each is named by the
``check`` of its key's declaration in :mod:`boson_django.conf`, and given a value of the
declared type; it returns what is wrong with it, said plainly, or None."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.db import connections

from boson_django import conf


def libpq_options(options: dict[Any, Any]) -> str | None:
    """libpq parameters: names, each a whole number >= 0, a string or None (left out)."""
    for name, value in options.items():
        if not isinstance(name, str) or not name.isidentifier():
            return f"must name libpq parameters, got {name!r}."
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, str))
                                  or (isinstance(value, int) and value < 0)):
            return f"must give each libpq parameter a whole number >= 0, a string or None, got {name!r}: {value!r}."
    return None


def store_timeouts(timeouts: dict[Any, Any]) -> str | None:
    """Milliseconds (0: none) or None (left out), of the timeouts the store sets."""
    for name, value in timeouts.items():
        if name not in conf.DEFAULTS["STORE_TIMEOUTS"]:
            known = ", ".join(conf.DEFAULTS["STORE_TIMEOUTS"])
            return f"names {name!r}, which is not one of the timeouts the store sets ({known})."
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= 2_147_483_647):
            return f"must give each timeout milliseconds (0 to 2147483647, 0: none) or None, got {name!r}: {value!r}."
    return None


def importable(modules: Any) -> str | None:
    """The first TASK_MODULES entry that is not an importable module name, said plainly."""
    for module in modules:
        if not isinstance(module, str):
            return f"must list module names (str), got {module!r}."
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return f"names a module that cannot be imported: {module!r}."
    return None


def module_names(entries: Any) -> str | None:
    """The first ALLOWED_TASK_MODULES entry that is not a dotted module or package name."""
    if entries is None:
        return None
    for entry in entries:
        if not isinstance(entry, str) or not all(part.isidentifier() for part in entry.split(".")):
            return f"must list module or package names such as 'shop.tasks' or 'wagtail', got {entry!r}."
    return None


def database_alias(value: str) -> str | None:
    return None if value in connections.settings else f"names no database in DATABASES: {value!r}."


def pooler(value: str | None) -> str | None:
    return None if value in conf.POOLERS else f"must be None, 'session' or 'transaction', got {value!r}."


def channel(value: str) -> str | None:
    if value.isidentifier() and value.isascii() and len(value) <= 63:
        return None
    return f"must be a plain identifier of at most 63 ASCII characters, got {value!r}."


def schedules(value: dict[str, Any]) -> str | None:
    """``SCHEDULES``: each entry a sound schedule of a registered task."""
    from boson_django.schedules.spec import check_setting

    try:
        return check_setting(value)
    except Exception:  # noqa: BLE001 -- a module of tasks fails to import: boson.E005 names it
        return None
