"""``discard_on``: exception classes whose failures end a job at once instead of retrying.

A task's ``discard_on`` lists exception classes, or their dotted paths
(``"django.core.exceptions.ObjectDoesNotExist"``, ``"wagtail.models.Page.DoesNotExist"``).
When its handler raises an instance of one -- a subclass too, as ``isinstance`` says, so
``ObjectDoesNotExist`` covers every model's ``DoesNotExist`` -- the worker acks the
attempt ``DISCARD``: the job ends ``failed`` with that error and its traceback in the
attempt record, and is not retried.

A task's list comes from, first to last: its TaskConfig row (read when a handler
raises, so an edit applies to jobs already queued), ``BOSON["TASK_POLICIES"]``, its
``@task(discard_on=...)``. The settings' and the code's answer is worked out once per
task for the settings in force; each path is imported once per process.
"""

from __future__ import annotations

import builtins
import logging
import pkgutil
import re
from collections.abc import Iterable
from typing import Any

from boson_django import conf, registry, task_policies
from boson_django.errors import InvalidEnvelope

log = logging.getLogger("boson_django.worker")

Classes = tuple[type[BaseException], ...]

_DOTTED = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")
#: Path -> the exception class it names (only paths that did).
_imported: dict[str, type[BaseException]] = {}


def exception_class(path: str) -> type[BaseException]:
    """The exception class a dotted path names: its module imported, then attributes
    looked up (a model's ``DoesNotExist`` is ``app.models.Page.DoesNotExist``); a bare
    name is a builtin's (``KeyError``). ``ValueError`` saying why when it names no
    exception class."""
    found = _imported.get(path)
    if found is not None:
        return found
    if not isinstance(path, str) or not _DOTTED.fullmatch(path):
        raise ValueError(f"{path!r} is not a dotted path to an exception class (module.Class)")
    if "." not in path and not hasattr(builtins, path):
        raise ValueError(f"{path!r} is no builtin exception: give the class's dotted path (module.Class)")
    try:
        found = pkgutil.resolve_name(path if "." in path else f"builtins.{path}")
    except Exception as exc:  # noqa: BLE001 -- whatever importing the user's module raised, said
        raise ValueError(f"{path!r} cannot be imported: {type(exc).__name__}: {exc}") from exc
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise ValueError(f"{path!r} is not an exception class: it is {found!r:.80}")
    _imported[path] = found
    return found


def path_of(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def entries(value: Any, field: str = "discard_on") -> tuple[Any, ...]:
    """``value`` as a tuple of entries (classes and paths), unchecked: a class, a path, a
    text of paths split on commas and whitespace (a TaskConfig field, one per line), or
    an iterable of classes and paths. ``InvalidEnvelope`` naming ``field`` for anything else."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part for part in re.split(r"[\s,]+", value) if part)
    if isinstance(value, type):
        return (value,)
    if isinstance(value, Iterable) and not isinstance(value, (bytes, dict)):
        found = tuple(value)
        for entry in found:
            if not isinstance(entry, (str, type)):
                raise InvalidEnvelope(field, f"lists {entry!r:.60}: give exception classes or their dotted paths")
        return found
    raise InvalidEnvelope(field, f"must list exception classes or their dotted paths, got {type(value).__name__}")


def classes(value: Any, field: str = "discard_on") -> Classes:
    """Every entry of ``value`` as an exception class, imported; ``InvalidEnvelope``
    naming ``field`` and the entry when one names none."""
    found: list[type[BaseException]] = []
    for entry in entries(value, field):
        if isinstance(entry, type):
            if not issubclass(entry, BaseException):
                raise InvalidEnvelope(field, f"lists {entry!r}, which is not an exception class")
            found.append(entry)
            continue
        try:
            found.append(exception_class(entry))
        except ValueError as exc:
            raise InvalidEnvelope(field, str(exc)) from exc
    return tuple(found)


def stored(value: Any, field: str = "discard_on") -> str | None:
    """``value`` as a TaskConfig row keeps it: the dotted paths, one per line, each
    checked to import as an exception class (a class given must be importable by its
    path); None when it lists nothing (the row does not set it)."""
    paths = []
    for entry, cls in zip(entries(value, field), classes(value, field)):
        path = entry if isinstance(entry, str) else path_of(cls)
        if not isinstance(entry, str) and _resolves(path) is not cls:
            raise InvalidEnvelope(field, f"lists {cls!r}, which its dotted path {path!r} does not name "
                                         "(defined inside a function?)")
        paths.append(path)
    return "\n".join(dict.fromkeys(paths)) or None


def _resolves(path: str) -> Any:
    try:
        return exception_class(path)
    except ValueError:
        return None


# -- the worker's question -----------------------------------------------------------


def for_task(task: str, configured: str | None) -> Classes:
    """The classes whose instances discard a job of ``task``: ``configured`` (its
    TaskConfig row's ``discard_on``) when set, else :func:`task_default`."""
    if not configured:
        return task_default(task)
    found = _CONFIGURED.get(configured)
    if found is None:
        found = _CONFIGURED[configured] = _lenient(entries(configured), f"the TaskConfig row of {task!r}")
    return found


#: A TaskConfig row's ``discard_on`` text -> its classes (a bad entry is logged once).
_CONFIGURED: dict[str, Classes] = {}


#: Task -> (settings object, registered Task, classes): :func:`task_default`'s answers.
_DEFAULTS: dict[str, tuple[Any, Any, Classes]] = {}


def task_default(task: str) -> Classes:
    """``discard_on`` from ``TASK_POLICIES``, else from ``@task(discard_on=...)``, as
    classes: worked out once per task, and again only when the settings object or the
    registered Task changes."""
    settings, code = conf.get(), registry.get(task)
    known = _DEFAULTS.get(task)
    if known is not None and known[0] is settings and known[1] is code:
        return known[2]
    listed = task_policies.layered(task, {"discard_on": getattr(code, "discard_on", None)}).get("discard_on")
    where = (f"BOSON['TASK_POLICIES'] for {task!r}" if "discard_on" in task_policies.for_task(task)
             else f"@task(discard_on=...) of {task!r}")
    try:
        found = _lenient(entries(listed), where)
    except InvalidEnvelope as exc:
        log.error("boson: %s is not a list of exceptions (%s); nothing is discarded", where, exc)
        found = ()
    _DEFAULTS[task] = settings, code, found
    return found


def _lenient(listed: tuple[Any, ...], where: str) -> Classes:
    """The classes of the entries that name one; each other is logged and left out (the
    system check or the admin named it before; the worker must still ack the attempt)."""
    found: list[type[BaseException]] = []
    for entry in listed:
        try:
            found.extend(classes((entry,)))
        except InvalidEnvelope as exc:
            log.error("boson: discard_on of %s: %s; that entry is ignored", where, exc)
    return tuple(found)
