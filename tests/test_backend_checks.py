"""``BosonBackend.check()``, which Django's own checks run for every backend of ``TASKS``:
``QUEUES`` and ``OPTIONS`` are reported at start-up, naming the entry (boson.E008, E009)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from django.core import checks
from django.test import override_settings

from boson_django.compat import task_backends

BACKEND = "boson_django.backend.BosonBackend"


def backend_messages(**entry) -> list[checks.CheckMessage]:
    with override_settings(TASKS={"default": {"BACKEND": BACKEND}, "jobs": {"BACKEND": BACKEND, **entry}}):
        return list(task_backends["jobs"].check())


def test_a_plain_entry_passes():
    assert backend_messages() == []
    assert backend_messages(QUEUES=["default", "emails"], OPTIONS={"database": "default"}) == []
    assert backend_messages(QUEUES=[], OPTIONS=None) == []


def test_the_framework_runs_the_backends_check(db):
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, "OPTIONS": {"databse": "default"}}}):
        found = [m.id for m in checks.run_checks()]
    assert "boson.E009" in found


@pytest.mark.parametrize(("queues", "says"), [
    ("default", "must be a list of queue names, got str 'default'"),
    (["default", ""], "has '', which is not a queue name"),
    (["mail\nurgent"], "has 'mail\\nurgent', which is not a queue name (queue: contains a control character"),
])
def test_queues_that_no_enqueue_could_use(queues, says):
    (message,) = backend_messages(QUEUES=queues)
    assert message.id == "boson.E008"
    assert message.msg.startswith("TASKS['jobs']['QUEUES'] ")
    assert says in message.msg


def test_an_unknown_option_is_named_with_the_likely_one():
    (message,) = backend_messages(OPTIONS={"databse": "default"})
    assert (message.id, message.msg, message.hint) == (
        "boson.E009", "TASKS['jobs']['OPTIONS'] has an unknown key 'databse'.", "Did you mean 'database'?")


@pytest.mark.parametrize("database", ["nowhere", 3])
def test_a_database_not_in_databases(database):
    (message,) = backend_messages(OPTIONS={"database": database})
    assert message.id == "boson.E009"
    assert message.msg == f"TASKS['jobs']['OPTIONS']['database'] is {database!r}, which is not an alias in DATABASES."


def test_options_that_are_not_a_dict():
    (message,) = backend_messages(OPTIONS=["database"])
    assert (message.id, message.msg) == ("boson.E009", "TASKS['jobs']['OPTIONS'] must be a dict, got list.")


def test_the_backend_without_the_app_installed_says_what_to_add(tmp_path):
    """Django builds the backend when a task is declared or enqueued: without
    ``boson_django`` installed that failed on a boson model's definition, naming a model."""
    (tmp_path / "noapp_settings.py").write_text(
        "SECRET_KEY = 'x'\nUSE_TZ = True\nINSTALLED_APPS = ['django.contrib.contenttypes', 'django.contrib.auth']\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3', 'NAME': ':memory:'}}\n"
        f"TASKS = {{'default': {{'BACKEND': '{BACKEND}'}}}}\n"
    )
    script = "import django; django.setup()\nfrom boson_django.compat import task_backends\ntask_backends['default']\n"
    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "noapp_settings", "PYTHONPATH": f"{tmp_path}{os.pathsep}{root}"},
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured: TASKS names boson_django.backend.BosonBackend, but 'boson_django' is not in " \
           "INSTALLED_APPS" in done.stderr, done.stderr


def test_the_backend_built_while_the_apps_load_without_the_app_installed_says_what_to_add(tmp_path):
    """An app's models module that declares a task builds the backend while Django loads
    the apps (before ``apps.ready``): it too says to install ``boson_django``."""
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "models.py").write_text("from boson_django.compat import task_backends\ntask_backends['default']\n")
    (tmp_path / "shop_settings.py").write_text(
        "SECRET_KEY = 'x'\nUSE_TZ = True\nINSTALLED_APPS = ['django.contrib.contenttypes', 'shop']\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3', 'NAME': ':memory:'}}\n"
        f"TASKS = {{'default': {{'BACKEND': '{BACKEND}'}}}}\n"
    )
    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n"], capture_output=True, text=True, timeout=60,
        cwd=tmp_path, env={**os.environ, "DJANGO_SETTINGS_MODULE": "shop_settings", "PYTHONPATH": f"{tmp_path}{os.pathsep}{root}"},
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured: TASKS names boson_django.backend.BosonBackend, but 'boson_django' is not in " \
           "INSTALLED_APPS" in done.stderr, done.stderr
