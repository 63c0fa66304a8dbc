"""Client sites: made by the client's own project generator into a temporary directory,
changed only as a boson user changes a project (settings; for a library with no project
of its own, the model its README shows), and run in their own processes with their own
settings -- never this suite's.

Two copies of one site are made: one whose ``TASKS`` backend is boson, one with Django's
``ImmediateBackend`` (the reference: every task runs at enqueue). Both have the same
``INSTALLED_APPS``, so one migrated database serves both (cloned after ``migrate``).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from tests import databases
from tests.clients.site_actions import ADMIN

ROOT = pathlib.Path(__file__).resolve().parents[2]
BOSON = "boson_django.backend.BosonBackend"
PROJECT = "mysite"
#: The clients the suite was written against: keep in step with setup.cfg's ``clients`` extra.
PINNED = {"wagtail": "8.0.1", "django-pictures": "1.8.0"}


def missing(distribution: str) -> str | None:
    """Why the tests of a pinned client cannot run here, or None."""
    from importlib.metadata import PackageNotFoundError, version

    pin = PINNED[distribution]
    try:
        found = version(distribution)
    except PackageNotFoundError:
        return f"{distribution} is not installed (pip install -e '.[clients]', which pins {distribution}=={pin})"
    if found != pin:
        return f"{distribution} {found} is installed, the suite pins {pin} (pip install -e '.[clients]')"
    return None


def tasks_module() -> str:
    """``django.tasks`` (Django 6) or ``django_tasks`` (the backport, Django 5.2)."""
    from boson_django.compat import TASKS_MODULE

    return TASKS_MODULE


def pg_params(name: str) -> dict[str, str]:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": os.environ.get("BOSON_PG_USER", "postgres"),
        "HOST": os.environ.get("BOSON_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("BOSON_PG_PORT", "5432"),
    }


def pg_admin(*statements: str) -> None:
    """Run statements on the server's ``postgres`` database (CREATE/DROP DATABASE)."""
    import psycopg

    params = pg_params("postgres")
    with psycopg.connect(dbname="postgres", user=params["USER"], host=params["HOST"], port=params["PORT"], autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def user_settings(apps: list[str], tasks: dict[str, Any], database: dict[str, Any], boson: dict | None = None) -> str:
    """What a user appends to the generated project's settings: the client's apps and boson
    (and the backport's app on Django 5.2), the ``TASKS`` backend, the database, and the
    ``BOSON`` setting boson's docs recommend for that client, if any -- never a list of
    task modules."""
    apps = [*apps, "boson_django"] + (["django_tasks"] if tasks_module() == "django_tasks" else [])
    return (
        "\n\n# Added for boson_django.\n"
        f"INSTALLED_APPS += {apps!r}\n"
        f'TASKS = {{"default": {tasks!r}}}\n'
        f'DATABASES = {{"default": {database!r}}}\n'
        + (f"BOSON = {boson!r}\n" if boson else "")
    )


class Site:
    """One copy of a site: its directory, database and settings; commands in subprocesses."""

    def __init__(self, directory: pathlib.Path, database: dict[str, Any], settings: str, actions: str):
        self.directory = directory
        self.database = database
        self.settings = settings
        self.actions_module = f"tests.clients.{actions}"

    def env(self) -> dict[str, str]:
        """The site's own settings; this checkout's boson_django first on the path."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BOSON_", "DJANGO_"))}
        env.update(PYTHONPATH=os.pathsep.join([str(self.directory), str(ROOT)]), DJANGO_SETTINGS_MODULE=self.settings)
        return env

    def run(self, *args: str, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """``python <args>`` in the site's directory; fails the test, with its output, on a
        non-zero exit."""
        done = subprocess.run([sys.executable, *args], cwd=self.directory, env={**self.env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{' '.join(args)} failed ({done.returncode}) in {self.directory}:\n{done.stdout}\n{done.stderr}"
        return done

    def manage(self, *args: str, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return self.run("manage.py", *args, timeout=timeout, env=env)

    def actions(self, command: str) -> Any:
        """One of the site's actions (``<client>_actions.py``, or site_actions' ``jobs`` and
        ``later``), run in the site; its JSON output."""
        return json.loads(self.run("-m", self.actions_module, command).stdout)


def generate(command: list[str], directory: pathlib.Path) -> None:
    directory.mkdir(parents=True)
    done = subprocess.run([*command, PROJECT, str(directory)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"


#: docs/tasks.md's recommended configuration for Wagtail: its index updates for an object
#: deleted before a worker ran are discarded, not retried.
WAGTAIL_BOSON = {
    "TASK_POLICIES": {
        "modelsearch.tasks": {"discard_on": ["django.core.exceptions.ObjectDoesNotExist"]},
        "wagtail": {"discard_on": ["django.core.exceptions.ObjectDoesNotExist"]},
    },
}


def wagtail_site(directory: pathlib.Path, backend: str, database: dict[str, Any]) -> Site:
    """``wagtail start``, with :func:`user_settings` appended (and :data:`WAGTAIL_BOSON`).
    On PostgreSQL, Wagtail's search backend needs ``django.contrib.postgres`` (its index
    uses SearchVectorField), whatever the Tasks backend."""
    generate([str(pathlib.Path(sys.executable).with_name("wagtail")), "start"], directory)
    apps = ["django.contrib.postgres"] if database["ENGINE"].endswith("postgresql") else []
    settings = directory / PROJECT / "settings" / "base.py"
    settings.write_text(settings.read_text() + user_settings(apps, {"BACKEND": backend}, database, WAGTAIL_BOSON))
    return Site(directory, database, f"{PROJECT}.settings.dev", "wagtail_actions")


#: The model django-pictures' README starts with, in an app ``startapp`` made.
GALLERY_MODELS = '''from django.db import models
from pictures.models import PictureField


class Photo(models.Model):
    title = models.CharField(max_length=255)
    picture = PictureField(upload_to="photos", width_field="picture_width", height_field="picture_height")
    picture_width = models.PositiveIntegerField(editable=False)
    picture_height = models.PositiveIntegerField(editable=False)
'''
#: The placeholder URLs of its README (``USE_PLACEHOLDERS`` follows ``DEBUG``, which a new
#: project sets; its system check refuses the project without them).
PICTURES_URLS = '''
from django.urls import include
from pictures.conf import app_settings

if app_settings.USE_PLACEHOLDERS:
    urlpatterns += [path("_pictures/", include("pictures.urls"))]
'''
GALLERY_ADMIN = '''from django.contrib import admin

from gallery.models import Photo

admin.site.register(Photo)
'''


def pictures_site(directory: pathlib.Path, backend: str, database: dict[str, Any]) -> Site:
    """``django-admin startproject`` and ``startapp gallery`` with django-pictures' README
    model, registered in the admin, and its placeholder URLs; the ``pictures`` queue listed
    in ``TASKS`` as its README says (Django's backends refuse an unlisted queue; boson needs
    no list)."""
    generate([sys.executable, "-m", "django", "startproject"], directory)
    site = Site(directory, database, f"{PROJECT}.settings", "pictures_actions")
    site.manage("startapp", "gallery")
    (directory / "gallery" / "models.py").write_text(GALLERY_MODELS)
    (directory / "gallery" / "admin.py").write_text(GALLERY_ADMIN)
    urls = directory / PROJECT / "urls.py"
    urls.write_text(urls.read_text() + PICTURES_URLS)
    settings = directory / PROJECT / "settings.py"
    tasks = {"BACKEND": backend, "QUEUES": ["default", "pictures"]}
    added = user_settings(["pictures", "gallery"], tasks, database) + 'MEDIA_ROOT = BASE_DIR / "media"\nMEDIA_URL = "media/"\n'
    settings.write_text(settings.read_text() + added)
    site.manage("makemigrations", "gallery", "--verbosity", "0")
    return site


def clone_database(source: dict[str, Any], target: dict[str, Any]) -> None:
    """Copy a migrated database (no process may hold it open)."""
    if source["ENGINE"].endswith("sqlite3"):
        with sqlite3.connect(source["NAME"]) as src, sqlite3.connect(target["NAME"]) as dst:
            src.backup(dst)
    else:
        pg_admin(f'DROP DATABASE IF EXISTS "{target["NAME"]}" WITH (FORCE)',
                 f'CREATE DATABASE "{target["NAME"]}" TEMPLATE "{source["NAME"]}"')


def drop_database(database: dict[str, Any]) -> None:
    if database["ENGINE"].endswith("postgresql"):
        pg_admin(f'DROP DATABASE IF EXISTS "{database["NAME"]}" WITH (FORCE)')


def pair(make: Callable[[pathlib.Path, str, dict[str, Any]], Site], name: str, tmp: pathlib.Path, vendor: str,
         made: list[Site]) -> tuple[Site, Site]:
    """Two copies of the site ``make`` builds, boson's and the immediate backend's, sharing
    one migrated database (cloned) and the same superuser. Each copy is added to ``made``
    as soon as it exists, for the caller to :func:`remove` even when a later step fails."""

    def database(copy: str) -> dict[str, Any]:
        if vendor == "postgres":
            return pg_params(databases.name(f"{name}_{copy}"))
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp / f"{name}_{copy}.sqlite3"),
                "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"}}

    boson = make(tmp / "boson", BOSON, database("boson"))
    made.append(boson)
    immediate = make(tmp / "immediate", f"{tasks_module()}.backends.immediate.ImmediateBackend", database("immediate"))
    made.append(immediate)
    if vendor == "postgres":
        pg_admin(f'DROP DATABASE IF EXISTS "{boson.database["NAME"]}" WITH (FORCE)', f'CREATE DATABASE "{boson.database["NAME"]}"')
    boson.manage("migrate", "--verbosity", "0")
    boson.manage("createsuperuser", "--noinput", "--username", ADMIN[0], "--email", "admin@example.com",
                 env={"DJANGO_SUPERUSER_PASSWORD": ADMIN[1]})
    clone_database(boson.database, immediate.database)
    return boson, immediate


def remove(site: Site) -> None:
    drop_database(site.database)
    shutil.rmtree(site.directory, ignore_errors=True)
