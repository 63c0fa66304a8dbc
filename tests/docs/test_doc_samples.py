"""Every ```python block of README.md and docs/*.md runs here, on this suite's store.

The blocks of one page run in order in one module namespace (a module inside the
installed test app, so tasks they define are registered and runnable). Then:

* a ``BOSON`` dict the page defines must pass boson's system checks;
* every ``test_*`` function the page defines is called, with ``boson_clock`` (the store
  clock frozen) or ``db`` as its arguments, each on the store as it was before the page
  ran (savepoints) -- so testing examples really run, as they would in a fresh suite.

The pages' tasks live in ``shop/tasks.py`` and their tests import them from there
(``from shop.tasks import charge_card``): ``shop`` and ``shop.tasks`` are the page's module
while its blocks run, and ``BASE_DIR`` is defined, as in a settings module that
``startproject`` made.

On Django 5.2 ``from django.tasks import`` becomes ``from django_tasks import`` (the
backport the docs name for that version); nothing else is rewritten.
"""

from __future__ import annotations

import inspect
import pathlib
import re
import sys
import tempfile
import types

import pytest
from django.db import transaction
from django.test import override_settings

from boson_django import checks
from boson_django.compat import TASKS_MODULE
from boson_django.testing import frozen_clock

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(page: pathlib.Path) -> list[str]:
    return BLOCK.findall(page.read_text())


def _adapt(code: str) -> str:
    if TASKS_MODULE == "django_tasks":
        code = code.replace("from django.tasks import", "from django_tasks import")
    return code


def _module(page: pathlib.Path) -> types.ModuleType:
    name = "tests.testapp.docs_" + re.sub(r"\W", "_", page.stem.lower())
    module = types.ModuleType(name)
    sys.modules[name] = module
    return module


def _as_shop_tasks(module: types.ModuleType) -> list[str]:
    """Makes ``from shop.tasks import ...`` import from the page's module; the names to pop."""
    shop = types.ModuleType("shop")
    shop.__path__ = []
    shop.tasks = module  # type: ignore[attr-defined]
    assert "shop" not in sys.modules, "a module named shop is importable: the pages' `from shop.tasks` would import it"
    sys.modules["shop"], sys.modules["shop.tasks"] = shop, module
    return ["shop", "shop.tasks"]


def _savepoint() -> str:
    """A savepoint of the current transaction (Django 6.1 renamed ``savepoint`` to
    ``savepoint_create`` and deprecated the old name)."""
    return getattr(transaction, "savepoint_create", transaction.savepoint)()


def _call_tests(namespace: dict) -> int:
    called = 0
    for name, fn in list(namespace.items()):
        if not (name.startswith("test_") and inspect.isfunction(fn)):
            continue
        params = list(inspect.signature(fn).parameters)
        assert set(params) <= {"db", "boson_clock"}, f"{name} asks for unknown fixtures {params}"
        savepoint = _savepoint()  # each test starts from the store as it was
        with frozen_clock() as frozen:
            fn(**{p: (frozen if p == "boson_clock" else None) for p in params})
        transaction.savepoint_rollback(savepoint)
        called += 1
    return called


def test_every_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, f"docs/{page.name} is not linked from README.md: add it to the Documentation list"


def test_pages_have_samples():
    assert sum(len(blocks(p)) for p in PAGES) >= 15


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
def test_python_samples_run(page, db):
    module = _module(page)
    namespace = module.__dict__
    aliases = _as_shop_tasks(module)
    namespace["BASE_DIR"] = pathlib.Path(tempfile.gettempdir())
    savepoint = _savepoint()
    try:
        for number, code in enumerate(blocks(page), 1):
            compiled = compile(_adapt(code), f"{page.name}[python block {number}]", "exec")
            exec(compiled, namespace)
        if isinstance(namespace.get("BOSON"), dict):
            with override_settings(BOSON=namespace["BOSON"]):
                assert checks.check_settings() == [], f"{page.name}: its BOSON example fails the checks"
        transaction.savepoint_rollback(savepoint)  # the page's tests start from an empty store
        _call_tests(namespace)
    finally:
        for name in [module.__name__, *aliases]:
            sys.modules.pop(name, None)
