"""``make test`` drops every PostgreSQL database it makes: each is named through
tests/databases.py, and a run that leaves one behind fails (tests/conftest.py) -- while
the databases of other runs on the same server, under other names, are left alone."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests import databases

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: What making a PostgreSQL database looks like in this suite's code.
MAKES_A_DATABASE = ("CREATE DATABASE", "fresh_database(", "BENCH_BOSON_DB", "BOSON_DEMO_PG_NAME")


def test_a_suffix_not_listed_is_refused_by_name():
    with pytest.raises(ValueError, match="suffix: 'scratch' is not one of"):
        databases.name("scratch")


def test_every_file_that_makes_a_database_names_it_through_the_list():
    """A database named any other way would escape the check for leftovers."""
    makers = [path for path in (ROOT / "tests").rglob("*.py") if path.name != "databases.py"
              and any(sign in path.read_text() for sign in MAKES_A_DATABASE) and path != pathlib.Path(__file__)]
    assert makers  # the search finds them (tests/clients, tests/demo, tests/bench, ...)
    unnamed = [str(path.relative_to(ROOT)) for path in makers if "databases.name(" not in path.read_text()]
    assert unnamed == []


@pytest.mark.postgres
def test_only_this_runs_databases_are_found_left_behind():
    mine, theirs = databases.name("poll"), f"{databases.PREFIX}_another_run"
    try:
        for name in (mine, theirs):
            databases.drop(name)
            _admin(f'CREATE DATABASE "{name}"')
        assert mine in databases.left_behind() and theirs not in databases.left_behind()
        databases.drop(mine)
        assert mine not in databases.left_behind()
    finally:
        databases.drop(mine, theirs)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_run_that_leaves_a_database_behind_fails_and_drops_it():
    prefix = f"{databases.PREFIX}_probe"  # a run of its own: its names are not this run's
    left = f"{prefix}_poll"
    env = dict(os.environ, BOSON_TEST_DB="postgres", BOSON_PG_TEST_NAME=prefix)
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/leftover_probe.py"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
        assert "1 passed" in done.stdout
        assert f"the run left PostgreSQL databases behind (dropped now): {left}" in done.stdout
        assert databases.existing([left]) == []
    finally:
        databases.drop(left)


def _admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(**databases.server(), autocommit=True) as conn:
        conn.execute(statement)
