"""The demo's tests run ``manage.py boson_demo`` of the example project in a subprocess,
on the store this suite runs against: a SQLite file of the test's own, or the PostgreSQL
database ``<BOSON_PG_TEST_NAME>_demo``, dropped afterwards."""

from __future__ import annotations

import os
import pathlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests import databases

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "example_project"


def on_postgres() -> bool:
    return os.environ.get("BOSON_TEST_DB", "sqlite") == "postgres"


class Demo:
    """Where a test's demo keeps its store and logs, and how to start it."""

    def __init__(self, tmp_path: pathlib.Path):
        self.logs = tmp_path / "logs"
        self.sqlite = tmp_path / "demo.sqlite3"
        self.env = dict(os.environ, DJANGO_SETTINGS_MODULE="demo_site.settings", PYTHONPATH=str(ROOT))
        if on_postgres():
            self.env.update(BOSON_DEMO_DB="postgres", BOSON_DEMO_PG_NAME=databases.name("demo"))
        else:
            self.env.update(BOSON_DEMO_DB="sqlite", BOSON_DEMO_SQLITE=str(self.sqlite))

    def command(self, *options: str) -> list[str]:
        return [sys.executable, "manage.py", "boson_demo", *options, "--log-dir", str(self.logs)]

    def run(self, *options: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*options), cwd=EXAMPLE, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def popen(self, *options: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*options), cwd=EXAMPLE, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` on the demo's store, read straight from the database."""
        if on_postgres():
            import psycopg

            with psycopg.connect(**{**databases.server(), "dbname": databases.name("demo")}) as conn:
                return conn.execute(sql).fetchall()
        with sqlite3.connect(self.sqlite) as conn:
            return conn.execute(sql).fetchall()

    def logs_tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.logs.glob("*.log")))


@pytest.fixture(scope="module")
def example_on_path() -> Iterator[None]:
    """The example project's packages (``shop``) importable in this process."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield
    finally:
        sys.path.remove(str(EXAMPLE))


@pytest.fixture
def demo(tmp_path) -> Iterator[Demo]:
    try:
        yield Demo(tmp_path)
    finally:
        if on_postgres():
            databases.drop(databases.name("demo"))
