"""The PostgreSQL databases this suite makes, by name: each is dropped by the test or
fixture that made it, and a run on PostgreSQL fails if one is left behind (conftest's
``pytest_sessionfinish``).

All are named after ``BOSON_PG_TEST_NAME`` (default ``test_boson``): Django's test
database has that name, every other one ``<name>_<suffix>`` with a suffix of
``SUFFIXES``. A database is made only under a name from :func:`name`, so the list is
complete; and only these names are ever checked or dropped, so the databases of another
run on the same server (under another ``BOSON_PG_TEST_NAME``) are never touched.

Under pytest-xdist each worker is a run of its own: ``<name>_<worker id>`` (``test_boson_gw0``)
and its own SQLite file (:func:`_split_per_xdist_worker`); the controller checks every
worker's names at the end (tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


def _split_per_xdist_worker() -> None:
    """In a pytest-xdist worker (``PYTEST_XDIST_WORKER``), suffix ``BOSON_PG_TEST_NAME`` and
    ``BOSON_SQLITE_PATH`` with the worker id, in the environment, once: the subprocesses its
    tests start (workers, the demo, nested runs) inherit the worker's names and keep them
    (``BOSON_TEST_WORKER`` says they are applied already). Idempotent."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker or os.environ.get("BOSON_TEST_WORKER") == worker:
        return
    os.environ["BOSON_TEST_WORKER"] = worker
    os.environ["BOSON_PG_TEST_NAME"] = f"{os.environ.get('BOSON_PG_TEST_NAME', 'test_boson')}_{worker}"
    sqlite = os.environ.get("BOSON_SQLITE_PATH")
    if sqlite:  # the controller's file: each worker gets its own beside it
        root, ext = os.path.splitext(sqlite)
        os.environ["BOSON_SQLITE_PATH"] = f"{root}_{worker}{ext}"


_split_per_xdist_worker()
PREFIX = os.environ.get("BOSON_PG_TEST_NAME", "test_boson")

#: Suffix -> who makes that database.
SUFFIXES = {
    "empty": "tests/test_backend_unmigrated.py: a database without boson's tables",
    "poll": "tests/bench/test_polling.py: the benchmark's kept polling connection",
    "bench": "tests/bench/test_bench_smoke.py: the benchmark driver's database",
    "demo": "tests/demo: the example project's demo",
    "wagtail_boson": "tests/clients: the Wagtail site on boson",
    "wagtail_immediate": "tests/clients: the Wagtail site on the immediate backend",
    "pictures_boson": "tests/clients: the django-pictures site on boson",
    "pictures_immediate": "tests/clients: the django-pictures site on the immediate backend",
}


def name(suffix: str) -> str:
    """The name of this run's database for ``suffix``; a suffix not in ``SUFFIXES`` is
    refused (a database made under it would escape the leftover check)."""
    if suffix not in SUFFIXES:
        raise ValueError(f"suffix: {suffix!r} is not one of tests/databases.py's SUFFIXES {sorted(SUFFIXES)}")
    return f"{PREFIX}_{suffix}"


def ours(prefix: str = PREFIX) -> list[str]:
    """Every database name this run (or the run named ``prefix``) may make: the test
    database, then the others."""
    return [prefix, *(f"{prefix}_{suffix}" for suffix in SUFFIXES)]


def server() -> dict[str, Any]:
    """Connection parameters of the server's ``postgres`` database (as tests/settings.py)."""
    return {
        "dbname": "postgres",
        "user": os.environ.get("BOSON_PG_USER", "postgres"),
        "host": os.environ.get("BOSON_PG_HOST", "127.0.0.1"),
        "port": os.environ.get("BOSON_PG_PORT", "5432"),
    }


def existing(names: list[str]) -> list[str]:
    """Those of ``names`` that exist on the server, in the order given."""
    import psycopg

    with psycopg.connect(**server(), autocommit=True) as conn:
        found = {row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", [names])}
    return [n for n in names if n in found]


def drop(*names: str) -> None:
    """Drop each of ``names`` if it exists, ending its connections."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(**server(), autocommit=True) as conn:
        for each in names:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(each)))


def left_behind(*, keep_test_database: bool = False, workers: Sequence[str] = ()) -> list[str]:
    """This run's databases that still exist (Django's own test database left out when
    it is kept on purpose, ``--reuse-db``); with ``workers`` (pytest-xdist's ids, seen from
    its controller), those of each worker's run ``<name>_<worker id>``."""
    names = []
    for prefix in [f"{PREFIX}_{worker}" for worker in workers] or [PREFIX]:
        names += ours(prefix)[1:] if keep_test_database else ours(prefix)
    return existing(names)
