"""Which tasks may run: ``Task`` objects of installed apps' modules or ``BOSON["TASK_MODULES"]``.

A worker resolves a job's ``task`` name here and nowhere else: it never imports a
module named by a row. Installed apps' ``tasks`` modules and the configured modules are
imported once (autodiscovery); a task defined in another module of an installed app is
known once that module has been imported.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from typing import Any

from django.apps import apps
from django.core.signals import setting_changed

from boson_django import conf

_tasks: dict[str, Any] = {}
_lock = threading.Lock()
_discovered = False


def register(task: Any) -> None:
    """Record a Task under its boson name, ``Task.module_path``.

    The first Task of a name wins: ``.using(...)`` copies must not replace the declared one.
    """
    _tasks.setdefault(task.module_path, task)


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


#: Module -> allowed, for the settings in force (the worker asks once per job).
_allowed: dict[str, bool] = {}


def _allowed_module(module: str) -> bool:
    known = _allowed.get(module)
    if known is None:
        known = _allowed[module] = module in conf.get().TASK_MODULES or any(
            module == cfg.name or module.startswith(cfg.name + ".") for cfg in apps.get_app_configs()
        )
    return known


def _forget_allowed(**_: Any) -> None:
    """``TASK_MODULES`` or ``INSTALLED_APPS`` may have changed (``override_settings``):
    what may run is decided again, and the modules now listed are imported at the next
    lookup (a discovery made under an override must not stand for the settings after it)."""
    global _discovered
    _allowed.clear()
    _discovered = False


setting_changed.connect(_forget_allowed, dispatch_uid="boson_django.registry.forget_allowed")


def get(name: str) -> Any | None:
    """The registered Task named ``name``, or None: unknown names never resolve to code."""
    autodiscover()
    found = _tasks.get(name)
    if found is None or not _allowed_module(found.func.__module__):
        return None
    return found


def is_registered(name: str) -> bool:
    return get(name) is not None


def outside_apps(name: str) -> str | None:
    """Why a task this process defined is not registered, when that is the reason: its
    module is in no installed app and not in ``TASK_MODULES`` (the app left out of
    ``INSTALLED_APPS``, or the task defined in a test module). None otherwise."""
    found = _tasks.get(name)
    if found is None or _allowed_module(found.func.__module__):
        return None
    return (
        f"it is defined in module {found.func.__module__!r}, which is in no installed app and not in "
        "BOSON['TASK_MODULES']: add its app to INSTALLED_APPS, or define the task in an installed app's "
        "`tasks` module"
    )


def defaults_for(name: str) -> dict[str, Any]:
    """The boson policy the task declared in code (``@task(max_attempts=...)``)."""
    found = get(name)
    policy = getattr(found, "boson_policy", None)
    return dict(policy()) if callable(policy) else {}


def names() -> list[str]:
    autodiscover()
    return sorted(n for n in _tasks if get(n) is not None)


def closest(name: str) -> str | None:
    """The registered task name most like ``name`` (a likely typo's fix), or None.

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
