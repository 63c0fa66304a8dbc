"""What the admin benchmarks share: a database of their own (PostgreSQL, or a SQLite
file), migrated, and a superuser's test client on it."""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def use_postgres(default_name: str) -> None:
    """Point the test settings at PostgreSQL database ``default_name`` (``BOSON_PG_NAME``
    names another); call before Django is set up."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ["BOSON_TEST_DB"] = "postgres"
    os.environ.setdefault("BOSON_PG_NAME", default_name)


def use_sqlite(default_path: str) -> None:
    """Point the test settings at SQLite file ``default_path`` (``BOSON_SQLITE_PATH``
    names another); call before Django is set up."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ["BOSON_TEST_DB"] = "sqlite"
    os.environ.setdefault("BOSON_SQLITE_PATH", default_path)


def superuser_client(*, fresh: bool) -> Any:
    """Create the database (afresh when ``fresh``, else only if missing), set Django up,
    migrate, and log a superuser in on a test client."""
    if os.environ["BOSON_TEST_DB"] == "postgres":
        _create_database(fresh)
    elif fresh and os.path.exists(os.environ["BOSON_SQLITE_PATH"]):
        os.remove(os.environ["BOSON_SQLITE_PATH"])
    import django
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.filter(username="bench").first() or User.objects.create_superuser("bench", password="x")
    client = Client()
    client.force_login(user)
    return client


def _create_database(fresh: bool) -> None:
    import psycopg

    name = os.environ["BOSON_PG_NAME"]
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres", autocommit=True) as c:
        if fresh:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if fresh or not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            c.execute(f'CREATE DATABASE "{name}"')
