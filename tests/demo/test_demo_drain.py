"""The demo's non-interactive mode, end to end: ``manage.py boson_demo --drain`` in the
example project, with real worker processes, on the store this suite runs against.

The command itself asserts where every job ended (completed; retried then completed;
rate-limited then completed; resumed after a kill; deduplicated; quarantined) and exits
non-zero otherwise. On PostgreSQL it uses its own database, dropped afterwards.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "example_project"


def _demo_env(tmp_path: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="demo_site.settings", PYTHONPATH=str(ROOT))
    if os.environ.get("BOSON_TEST_DB", "sqlite") == "postgres":
        env.update(BOSON_DEMO_DB="postgres", BOSON_DEMO_PG_NAME=_pg_name())
    else:
        env.update(BOSON_DEMO_DB="sqlite", BOSON_DEMO_SQLITE=str(tmp_path / "demo.sqlite3"))
    return env


def _pg_name() -> str:
    return os.environ.get("BOSON_PG_TEST_NAME", "test_boson") + "_demo"


@pytest.fixture
def demo_db():
    yield
    if os.environ.get("BOSON_TEST_DB", "sqlite") == "postgres":
        import psycopg

        with psycopg.connect(dbname="postgres", user=os.environ.get("BOSON_PG_USER", "postgres"),
                             host=os.environ.get("BOSON_PG_HOST", "127.0.0.1"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{_pg_name()}" WITH (FORCE)')


@pytest.mark.slow
def test_demo_drains_every_job_to_its_expected_end(tmp_path, demo_db):
    command = [sys.executable, "manage.py", "boson_demo", "--drain", "--timeout", "120",
               "--log-dir", str(tmp_path / "logs")]
    done = subprocess.run(command, cwd=EXAMPLE, env=_demo_env(tmp_path), capture_output=True, text=True, timeout=240)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted((tmp_path / "logs").glob("*.log")))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"
    assert "every demo job ended where it should" in done.stdout
    for group in ("emails", "partner flaky", "partner 429", "report", "search index", "poison feed"):
        assert f"ok   {group}" in done.stdout, done.stdout
