"""Not collected by the suite (not a ``test_*.py``): tests/test_suite_databases.py runs
it in a pytest of its own, to see that run fail for the database this test leaves behind."""

from __future__ import annotations


def test_leaves_one_of_the_suites_databases_behind():
    import psycopg

    from tests import databases

    with psycopg.connect(**databases.server(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{databases.name("poll")}"')
