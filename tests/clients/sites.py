"""Stock client sites: made by the client's own project generator into a temporary
directory, changed only as a boson user changes a project (settings), and run in their own
processes with their own settings -- never this suite's.

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
from typing import Any

from tests.clients.wagtail_actions import ADMIN

ROOT = pathlib.Path(__file__).resolve().parents[2]
ACTIONS = pathlib.Path(__file__).with_name("wagtail_actions.py")
#: The Wagtail the suite was written against: keep in step with setup.cfg's ``clients`` extra.
WAGTAIL_VERSION = "8.0.1"
PROJECT = "mysite"


def missing_wagtail() -> str | None:
    """Why the Wagtail client tests cannot run here, or None."""
    try:
        import wagtail
    except ImportError:
        return f"wagtail is not installed (pip install -e '.[clients]', which pins wagtail=={WAGTAIL_VERSION})"
    if wagtail.__version__ != WAGTAIL_VERSION:
        return f"wagtail {wagtail.__version__} is installed, the suite pins {WAGTAIL_VERSION} (pip install -e '.[clients]')"
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


def user_settings(backend: str, database: dict[str, Any]) -> str:
    """What a user of boson appends to the stock project's settings: boson installed (and
    the backport's app on Django 5.2), the ``TASKS`` backend, the database. Nothing else:
    no module list, no boson-specific setting. On PostgreSQL, Wagtail's search backend
    needs ``django.contrib.postgres`` installed too (its index uses SearchVectorField),
    whatever the Tasks backend."""
    apps = ["boson_django"] + (["django_tasks"] if tasks_module() == "django_tasks" else [])
    if database["ENGINE"].endswith("postgresql"):
        apps.append("django.contrib.postgres")
    return (
        "\n\n# Added for boson_django.\n"
        f"INSTALLED_APPS += {apps!r}\n"
        f'TASKS = {{"default": {{"BACKEND": {backend!r}}}}}\n'
        f'DATABASES = {{"default": {database!r}}}\n'
    )


class Site:
    """One copy of a stock site: its directory, its database, commands in subprocesses."""

    def __init__(self, directory: pathlib.Path, database: dict[str, Any]):
        self.directory = directory
        self.database = database

    def env(self) -> dict[str, str]:
        """The site's own settings; this checkout's boson_django first on the path."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BOSON_", "DJANGO_"))}
        env.update(PYTHONPATH=os.pathsep.join([str(self.directory), str(ROOT)]), DJANGO_SETTINGS_MODULE=f"{PROJECT}.settings.dev")
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
        """One of wagtail_actions.py's commands, run in the site; its JSON output."""
        return json.loads(self.run(str(ACTIONS), command).stdout)


def start_wagtail(directory: pathlib.Path, backend: str, database: dict[str, Any]) -> Site:
    """``wagtail start`` into ``directory``, with :func:`user_settings` appended."""
    directory.mkdir(parents=True)
    wagtail = pathlib.Path(sys.executable).with_name("wagtail")
    done = subprocess.run([str(wagtail), "start", PROJECT, str(directory)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"wagtail start failed:\n{done.stdout}\n{done.stderr}"
    settings = directory / PROJECT / "settings" / "base.py"
    settings.write_text(settings.read_text() + user_settings(backend, database))
    return Site(directory, database)


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


def wagtail_pair(tmp: pathlib.Path, vendor: str, pg_prefix: str, made: list[Site]) -> tuple[Site, Site]:
    """Two copies of a stock Wagtail site, boson's and the immediate backend's, sharing one
    migrated database (cloned) and the same superuser. Each copy is added to ``made`` as
    soon as it exists, for the caller to :func:`remove` even when a later step fails."""

    def database(name: str) -> dict[str, Any]:
        if vendor == "postgres":
            return pg_params(f"{pg_prefix}_{name}")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp / f"{name}.sqlite3"),
                "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"}}

    boson = start_wagtail(tmp / "boson", "boson_django.backend.BosonBackend", database("wagtail_boson"))
    immediate = start_wagtail(tmp / "immediate", f"{tasks_module()}.backends.immediate.ImmediateBackend",
                              database("wagtail_immediate"))
    made += [boson, immediate]
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
