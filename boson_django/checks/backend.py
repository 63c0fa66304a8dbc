"""``BosonBackend.check()``: what a ``TASKS`` entry naming a boson backend may hold."""

from __future__ import annotations

import difflib
from typing import Any

from django.core import checks
from django.db import connections

from boson_django import validation

#: What ``OPTIONS`` of a ``BosonBackend`` entry of ``TASKS`` may hold.
BACKEND_OPTIONS = ("database",)


def backend_problems(alias: str, queues: Any, options: Any) -> list[checks.CheckMessage]:
    """``BosonBackend.check()``: its ``TASKS`` entry's ``QUEUES`` are queue names, and its
    ``OPTIONS`` are known, naming a database in ``DATABASES``. Unchecked, a queue name no
    enqueue can use failed every call with an error naming neither the setting nor the
    backend, and an unknown option (a misspelt ``database``) did nothing."""
    entry = f"TASKS[{alias!r}]"
    problems = [checks.Error(f"{entry}['QUEUES'] {why}", id="boson.E008") for why in _bad_queues(queues)]
    options = {} if options is None else options
    if not isinstance(options, dict):
        return [*problems, checks.Error(f"{entry}['OPTIONS'] must be a dict, got {type(options).__name__}.",
                                        id="boson.E009")]
    for key in options:
        if key not in BACKEND_OPTIONS:
            close = difflib.get_close_matches(str(key), BACKEND_OPTIONS, n=1)
            problems.append(checks.Error(
                f"{entry}['OPTIONS'] has an unknown key {key!r}.", id="boson.E009",
                hint=f"Did you mean {close[0]!r}?" if close else f"Known keys: {', '.join(BACKEND_OPTIONS)}.",
            ))
    database = options.get("database")
    if database is not None and (not isinstance(database, str) or database not in connections.settings):
        problems.append(checks.Error(
            f"{entry}['OPTIONS']['database'] is {database!r}, which is not an alias in DATABASES.",
            hint="Name the database that holds the store (default: BOSON['DATABASE']).", id="boson.E009",
        ))
    return problems


def _bad_queues(queues: Any) -> list[str]:
    if queues is None:
        return []
    if isinstance(queues, str) or not isinstance(queues, (list, tuple, set, frozenset)):
        return [f"must be a list of queue names, got {type(queues).__name__} {queues!r:.60}."]
    found = []
    for queue in queues:
        try:
            validation.name(queue, "queue")
        except ValueError as exc:
            found.append(f"has {queue!r:.60}, which is not a queue name ({exc}).")
    return found
