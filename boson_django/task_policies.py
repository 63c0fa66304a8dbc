"""``BOSON["TASK_POLICIES"]``: policy for every task under a module path, from settings.

For tasks whose code is not yours (a third-party package's ``@task``), the site says
in its settings what their ``@task(...)`` would::

    BOSON = {"TASK_POLICIES": {
        "modelsearch.tasks": {"discard_on": ["django.core.exceptions.ObjectDoesNotExist"]},
        "wagtail": {"max_attempts": 5},
    }}

A key is a prefix of task paths (``Task.module_path``) on a dotted boundary: ``"wagtail"``
(or ``"wagtail."``) covers ``wagtail.tasks.x`` and ``wagtail.images.tasks.y``, never
``wagtail_localize.tasks.z``; a whole task path covers that task alone. For each field,
the longest key that covers the task and sets the field wins, so a short prefix gives
defaults that a longer one refines field by field.

Where it stands (``services.config.resolve``): a value given per call with
``.using(...)``, then the task's TaskConfig row, then these, then ``@task(...)``, then
the global ``BOSON`` settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from boson_django import conf, validation

#: What an entry may set: TaskConfig's fields a job stores, and ``discard_on``
#: (``max_active`` and ``uniqueness`` are read from TaskConfig rows only).
FIELDS = (
    "max_attempts", "rate_class", "weight", "retention_ms", "lease_ms", "timeout_ms",
    "crash_limit", "queue", "priority", "discard_on",
)
#: TaskConfig fields an entry may not set, and why (said by the system check).
ROW_ONLY = {
    "max_active": "admission reads it from TaskConfig rows",
    "uniqueness": "it is a TaskConfig row's switch",
}


def covers(prefix: str, task: str) -> bool:
    """Whether the key ``prefix`` covers the task path ``task``: the same path, or one
    under it on a dot (``"a.b"`` covers ``a.b.c``, not ``a.bc``)."""
    prefix = prefix[:-1] if prefix.endswith(".") else prefix
    return task == prefix or task.startswith(prefix + ".")


#: (the settings object it was built for, task path -> its policy from TASK_POLICIES).
_cached: tuple[Any, dict[str, dict[str, Any]]] | None = None


def for_task(task: str) -> dict[str, Any]:
    """The fields ``TASK_POLICIES`` sets for ``task``, each from the longest key that
    covers the task and sets it (a value of None sets nothing). Kept per task while the
    settings object is the one in force (``override_settings`` makes a new one), so an
    enqueue or a worker asks a dict, not the prefixes. Do not mutate the result."""
    global _cached
    settings = conf.get()
    cached = _cached
    if cached is None or cached[0] is not settings:
        cached = _cached = (settings, {})
    found = cached[1].get(task)
    if found is None:
        found = cached[1][task] = _merged(settings.TASK_POLICIES, task)
    return found


def layered(task: str, code: Mapping[str, Any], row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A task's policy fields by precedence, the one statement of it: its TaskConfig
    ``row`` over ``TASK_POLICIES`` (longest prefix, :func:`for_task`) over its
    ``@task(...)`` defaults (``code``, whose None fields are unset). Enqueue
    (``services.config.resolve``) and the worker's ``discard_on`` both read it."""
    return {**{k: v for k, v in code.items() if v is not None}, **for_task(task), **(row or {})}


def _merged(policies: Any, task: str) -> dict[str, Any]:
    """Longest key last, so its fields win. A malformed entry (the system check names it)
    sets nothing rather than break every enqueue."""
    if not isinstance(policies, dict):
        return {}
    keys = sorted((k for k in policies if isinstance(k, str) and k.strip(".") and covers(k, task)),
                  key=lambda k: len(k.rstrip(".")))
    merged: dict[str, Any] = {}
    for key in keys:
        entry = policies[key]
        if isinstance(entry, dict):
            merged.update({f: v for f, v in entry.items() if f in FIELDS and v is not None})
    return merged


def check_setting(value: dict[Any, Any]) -> str | None:
    """The first problem of a ``TASK_POLICIES`` value, naming its key and field (for the
    system checks: ``BOSON['TASK_POLICIES'] entry 'wagtail': max_attempts: must be >= 1,
    got 0.``); None when it is sound. Each
    ``discard_on`` entry is imported: it must name an exception class."""
    for key, entry in value.items():
        problem = _bad_key(key) or _bad_entry(entry)
        if problem:
            return f"entry {key!r}: {problem}"
    return None


def _bad_key(key: Any) -> str | None:
    name = key[:-1] if isinstance(key, str) and key.endswith(".") else key
    if not isinstance(name, str) or not name or not all(part.isidentifier() for part in name.split(".")):
        return ("not a module path; a key is a dotted module or task path such as 'wagtail' or "
                "'modelsearch.tasks' (covering what is under it), never empty (BOSON's own keys "
                "are every task's defaults).")
    return None


def _bad_entry(entry: Any) -> str | None:
    from boson_django import discards

    if not isinstance(entry, dict):
        return f"must be a dict of policy fields, got {type(entry).__name__} {entry!r:.60}."
    for field, value in entry.items():
        if field in ROW_ONLY:
            return f"sets {field!r}, which only a TaskConfig row can ({ROW_ONLY[field]})."
        if field not in FIELDS:
            return f"has an unknown field {field!r}; use one of {', '.join(FIELDS)}."
        try:
            if field == "discard_on":
                discards.classes(value)
            elif value is not None:
                validation.POLICY_CHECKS[field](value, None)
        except ValueError as exc:
            return f"{exc}."
    return None
