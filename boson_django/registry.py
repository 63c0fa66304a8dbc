"""Which code a job may run: a module-level ``Task`` of a boson backend, found by its path.

A job's ``task`` is its Task's ``module_path`` (``"shop.tasks.send_receipt"``). As in
Django's own backends, any module-level task can be enqueued and run, wherever its module
lives: :func:`resolve` imports the module the path names on demand (once per process; a
failure is kept too) and accepts the object only if it is a ``Task`` whose path is that
name and whose backend is a boson backend. A plain function, a class, ``os.system`` or a
missing module never resolves. ``BOSON["ALLOWED_TASK_MODULES"]`` (opt-in) limits the
modules that may be imported at all, for hardened deployments.

Autodiscovery still imports every installed app's ``tasks`` module and
``BOSON["TASK_MODULES"]`` once, so that schedules and the admin's list of tasks know the
tasks declared there before any job names them.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from typing import Any

from django.apps import apps
from django.core.signals import setting_changed

from boson_django import conf

#: Every Task of a boson backend this process declared, by its boson name.
_tasks: dict[str, Any] = {}
#: Name -> (the Task, or None and why not): what :func:`resolve` decided, for the settings in force.
_resolved: dict[str, tuple[Any | None, str]] = {}
_lock = threading.RLock()
_discovered = False


def register(task: Any) -> None:
    """Record a Task under its boson name, ``Task.module_path``.

    The first Task of a name wins: ``.using(...)`` copies must not replace the declared one.
    """
    if _tasks.setdefault(task.module_path, task) is task:
        _resolved.pop(task.module_path, None)  # a name refused before its module finished importing


def autodiscover() -> None:
    global _discovered
    if _discovered:
        return
    with _lock:
        if _discovered:
            return
        for module, optional in task_modules():
            import_tasks(module, optional)
        _discovered = True


def task_modules() -> list[tuple[str, bool]]:
    """The modules autodiscovery imports, each with whether it may be absent: every
    installed app's ``tasks`` (optional), then ``BOSON["TASK_MODULES"]``."""
    found = [(f"{app_config.name}.tasks", True) for app_config in apps.get_app_configs()]
    return found + [(module, False) for module in conf.get().TASK_MODULES]


def import_tasks(module: str, optional: bool) -> None:
    """Import ``module``; an optional one that does not exist is skipped (an error
    raised while importing it, a missing dependency included, is not)."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not (optional and exc.name == module):
            raise


def allowed_module(module: str) -> bool:
    """Whether tasks of ``module`` may run: always, unless ``ALLOWED_TASK_MODULES`` is set;
    then only a module it lists, or one inside a package it lists (``"wagtail"`` allows
    ``"wagtail.search.tasks"``, not ``"wagtailmedia"``)."""
    listed = conf.get().ALLOWED_TASK_MODULES
    return listed is None or any(module == entry or module.startswith(entry + ".") for entry in listed)


def resolve(name: str) -> tuple[Any | None, str]:
    """The Task of a boson backend named ``name``, or ``(None, why)``: never anything else.

    Imports the module the name points into (at most once per process and name) unless
    ``ALLOWED_TASK_MODULES`` rules it out; an import that raises is reported, with its
    error, as why. The answer is kept until the settings change."""
    known = _resolved.get(name)
    if known is None:
        autodiscover()
        with _lock:
            known = _resolved.get(name)
            if known is None:
                known = _resolved[name] = _found(name)
    return known


def get(name: str) -> Any | None:
    """The Task named ``name``, or None: a name that is no boson Task never resolves to code."""
    return resolve(name)[0]


def is_registered(name: str) -> bool:
    return get(name) is not None


def why_unknown(name: str) -> str:
    """Why ``name`` resolves to no Task ("" when it does)."""
    return resolve(name)[1]


def _found(name: str) -> tuple[Any | None, str]:
    declared = _tasks.get(name)
    module, _, _ = name.rpartition(".")
    if not module:
        return None, "a task's name is its module path, 'package.module.function'"
    if not allowed_module(declared.func.__module__ if declared is not None else module):
        return None, f"its module is not in BOSON['ALLOWED_TASK_MODULES'] ({', '.join(conf.get().ALLOWED_TASK_MODULES)})"
    if declared is None:
        declared, why = _imported(name)
        if declared is None:
            return None, why
    return _checked(name, declared)


def _imported(name: str) -> tuple[Any | None, str]:
    """The object ``name`` points to: the longest prefix of it that is a module, imported,
    then the attributes after it (a qualified name such as ``Tasks.send`` included)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if not allowed_module(module):
            continue
        try:
            found: Any = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
                continue  # that module does not exist: a shorter prefix may
            return None, _import_failed(module, exc)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 -- any error of the imported module, named
            return None, _import_failed(module, exc)
        for attribute in parts[cut:]:
            found = getattr(found, attribute, None)
        if found is None:
            return None, f"module {module!r} has no {'.'.join(parts[cut:])!r}"
        return found, ""
    return None, f"no module of {name!r} can be imported"


def _import_failed(module: str, exc: BaseException) -> str:
    return f"importing module {module!r} failed: {type(exc).__module__}.{type(exc).__qualname__}: {exc}"


def _checked(name: str, found: Any) -> tuple[Any | None, str]:
    """``found`` if it is a Task named ``name`` whose backend is a boson backend."""
    from boson_django.compat import Task

    if not isinstance(found, Task):
        return None, f"it names a {type(found).__name__}, not a Task (a function declared with @task)"
    if found.module_path != name:
        return None, f"it names the Task {found.module_path!r}, declared under another path"
    if not _boson_backend(found.backend):
        return None, f"its Task is declared for the backend {found.backend!r}, which is not a boson backend"
    return found, ""


def _boson_backend(alias: str) -> bool:
    from boson_django.compat import task_backends

    try:
        return getattr(task_backends[alias], "boson_store", False) is True
    except Exception:  # noqa: BLE001 -- an alias missing from TASKS, or a backend that fails to load
        return False


def _forget(**_: Any) -> None:
    """``TASKS``, ``BOSON`` or ``INSTALLED_APPS`` may have changed (``override_settings``):
    every name is resolved again, and the modules now listed are imported at the next
    lookup (a decision made under an override must not stand for the settings after it)."""
    global _discovered
    _resolved.clear()
    _discovered = False


setting_changed.connect(_forget, dispatch_uid="boson_django.registry.forget")


def defaults_for(name: str) -> dict[str, Any]:
    """The boson policy the task declared in code (``@task(max_attempts=...)``)."""
    found = get(name)
    policy = getattr(found, "boson_policy", None)
    return dict(policy()) if callable(policy) else {}


def names() -> list[str]:
    """The tasks this process knows: those declared in what it has imported (autodiscovery
    first), allowed to run."""
    autodiscover()
    return sorted(n for n in list(_tasks) if get(n) is not None)


def closest(name: str) -> str | None:
    """The known task name most like ``name`` (a likely typo's fix), or None.

    Judged by the function's name first: every task of a project shares most of its
    module path, so comparing whole names suggested ``app.tasks.crash`` for
    ``app.tasks.future_task``, and nothing for a bare ``slow`` (``app.tasks.slow``)."""
    registered = names()
    tails = difflib.get_close_matches(_tail(name), sorted({_tail(each) for each in registered}), n=3)
    candidates = [each for each in registered if _tail(each) in tails]
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=0)
    return found[0] if found else None


def _tail(name: str) -> str:
    return name.rsplit(".", 1)[-1]
