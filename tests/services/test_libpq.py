"""``session.one_statement`` on libpq itself (``drivers.postgresql.libpq``): the same rows and errors as
psycopg's cursor, one prepared statement per session, prepared again when the session
lost it, and the cursor's way whenever a transaction is open or a value needs psycopg."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from django.db import DataError, IntegrityError, connection, transaction

from boson_django.drivers.postgresql import session
from boson_django.drivers.postgresql import libpq as _libpq

pytestmark = pytest.mark.postgres

TYPES = (
    "SELECT %s::text AS s, %s::int8 AS i, %s::float8 AS f, %s::bool AS b, %s::timestamptz AS t,"
    " %s::jsonb AS j, %s::text AS n"
)
VALUES = ["gr\u00fc\u00dfe \u2603 'quoted' \\", 2**62, 0.1, False,
          datetime(2026, 3, 29, 1, 30, tzinfo=timezone(timedelta(hours=-7))), '{"a": [1, null]}', None]


@pytest.fixture
def db(transactional_db):
    connection.ensure_connection()
    return connection


def ours() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'boson%%' ORDER BY name")
        return [row[0] for row in cursor.fetchall()]


def through_cursor(monkeypatch: pytest.MonkeyPatch, sql: str, params: list) -> list[dict]:
    with monkeypatch.context() as patched:
        patched.setattr(_libpq, "run", lambda *args: None)
        return session.one_statement(connection, TYPES if sql is None else sql, params)


def test_rows_come_back_as_the_cursor_reads_them(db, monkeypatch):
    fast = session.one_statement(db, TYPES, VALUES)
    assert ours(), "the statement did not run on libpq"
    assert fast == through_cursor(monkeypatch, TYPES, VALUES)
    row = fast[0]
    assert row["s"] == VALUES[0] and row["i"] == 2**62 and row["f"] == 0.1 and row["b"] is False
    assert row["t"] == VALUES[4] and row["t"].tzinfo is not None and row["n"] is None


def test_a_statement_is_prepared_once_per_session(db):
    for n in range(3):
        assert session.one_statement(db, "SELECT %s::int + 1 AS n", [n]) == [{"n": n + 1}]
    assert len(ours()) == 1
    db.close()  # a new connection: a new session, nothing prepared on it yet
    db.ensure_connection()
    assert ours() == []
    assert session.one_statement(db, "SELECT %s::int + 1 AS n", [41]) == [{"n": 42}]
    assert len(ours()) == 1


def test_a_deallocated_statement_is_prepared_again(db):
    session.one_statement(db, "SELECT %s::int AS n", [1])
    db.connection.execute("DEALLOCATE ALL")  # what psycopg sends at each rollback
    assert session.one_statement(db, "SELECT %s::int AS n", [2]) == [{"n": 2}]
    with pytest.raises(_Rollback), transaction.atomic():
        with db.cursor() as cursor:
            cursor.execute("SELECT 1")
        raise _Rollback
    assert session.one_statement(db, "SELECT %s::int AS n", [3]) == [{"n": 3}]


class _Rollback(Exception):
    pass


def test_in_a_transaction_the_cursor_runs_it_and_the_rollback_undoes_it(db):
    with db.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE libpq_t (id text PRIMARY KEY)")
    insert = "INSERT INTO libpq_t (id) VALUES (%s) RETURNING id"
    with pytest.raises(_Rollback), transaction.atomic():
        assert session.one_statement(db, insert, ["a"]) == [{"id": "a"}]
        raise _Rollback
    assert ours() == []
    with db.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM libpq_t")
        assert cursor.fetchone()[0] == 0


def test_errors_are_django_s(db):
    with db.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE libpq_u (id text PRIMARY KEY)")
    insert = "INSERT INTO libpq_u (id) VALUES (%s) RETURNING id"
    session.one_statement(db, insert, ["x"])
    with pytest.raises(IntegrityError, match="duplicate key"):
        session.one_statement(db, insert, ["x"])
    assert db.connection.info.transaction_status == 0  # nothing left open
    assert session.one_statement(db, insert, ["y"]) == [{"id": "y"}]


def test_values_without_a_plain_text_form_go_through_the_cursor(db):
    assert session.one_statement(db, "SELECT %s::int[] AS a", [[1, 2]]) == [{"a": [1, 2]}]
    with pytest.raises(DataError):
        session.one_statement(db, "SELECT %s::text AS s", ["nul\x00inside"])  # never cut short at the NUL
    naive = datetime(2026, 1, 1, 12, 0)
    assert session.one_statement(db, "SELECT %s::timestamp AS t", [naive]) == [{"t": naive}]
    assert ours() == []


def test_a_value_without_a_plain_text_form_tries_libpq_once(db, monkeypatch):
    """Then the cursor: asking libpq again would only say no again."""
    tries = []
    real = _libpq.run
    monkeypatch.setattr(_libpq, "run", lambda *args: tries.append(args[2]) or real(*args))
    assert session.one_statement(db, "SELECT %s::int[] AS a", [[1, 2]]) == [{"a": [1, 2]}]
    assert tries == ["SELECT %s::int[] AS a"]


def test_without_prepared_statements_nothing_of_ours_is_prepared(db, settings):
    settings.BOSON = {**settings.BOSON, "PREPARED_STATEMENTS": False}
    assert session.one_statement(db, "SELECT %s::int AS n", [7]) == [{"n": 7}]
    assert ours() == []


def test_other_threads_run_while_a_statement_waits(db):
    """PQexecPrepared waits with the GIL released: the worker's handler threads keep running
    while its loop waits on a claim."""
    counted = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            counted[0] += 1

    spinner = threading.Thread(target=count)
    spinner.start()
    try:
        before = counted[0]
        session.one_statement(db, "SELECT pg_sleep(%s) IS NULL AS waited", [0.2])
        during = counted[0] - before
    finally:
        stop.set()
        spinner.join()
    assert ours()
    assert during > 10_000  # with the GIL held it would be a handful at most (one switch interval)


def test_a_plan_the_table_outgrew_is_prepared_again(db):
    with db.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE libpq_w (id int)")
        cursor.execute("INSERT INTO libpq_w VALUES (1)")
    select = "SELECT * FROM libpq_w WHERE id = %s"
    assert session.one_statement(db, select, [1]) == [{"id": 1}]
    with db.cursor() as cursor:
        cursor.execute("ALTER TABLE libpq_w ADD COLUMN note text DEFAULT 'new'")  # as a migration would
    assert session.one_statement(db, select, [1]) == [{"id": 1, "note": "new"}]


def test_a_renamed_column_comes_back_under_its_new_name(db):
    """A statement's column names are kept from its first result: a rename changes the
    plan's result, so PostgreSQL refuses the old plan and the statement is prepared again."""
    with db.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE libpq_r (id int)")
        cursor.execute("INSERT INTO libpq_r VALUES (1)")
    select = "SELECT * FROM libpq_r WHERE %s::int = 1"
    assert session.one_statement(db, select, [1]) == [{"id": 1}]
    with db.cursor() as cursor:
        cursor.execute("ALTER TABLE libpq_r RENAME COLUMN id TO job")
    assert session.one_statement(db, select, [1]) == [{"job": 1}]



def test_a_changed_psycopg_gives_the_fast_path_up_once_and_statements_still_run(db, monkeypatch, caplog):
    """``errors.error_from_result`` stands for any internal a later psycopg may move: the
    probe of a new session finds it gone, before any statement of ours has run."""
    import psycopg.errors

    monkeypatch.setattr(_libpq, "_given_up", None)
    monkeypatch.delattr(psycopg.errors, "error_from_result")
    db.close()  # a new session: the probe runs before its first statement
    with caplog.at_level("WARNING", logger="boson_django"):
        for n in range(3):
            assert session.one_statement(db, "SELECT %s::int + 1 AS n", [n]) == [{"n": n + 1}]
        db.close()
        assert session.one_statement(db, TYPES, VALUES) == through_cursor(monkeypatch, TYPES, VALUES)
    assert ours() == []  # every statement ran through the cursor
    warnings = [r.getMessage() for r in caplog.records if "fast path" in r.getMessage()]
    assert len(warnings) == 1 and "error_from_result" in warnings[0] and "psycopg 3." in warnings[0], warnings


def test_the_probe_leaves_nothing_prepared_and_a_sound_psycopg_keeps_the_fast_path(db, monkeypatch):
    monkeypatch.setattr(_libpq, "_given_up", None)
    db.close()
    assert session.one_statement(db, "SELECT %s::int + 1 AS n", [1]) == [{"n": 2}]
    assert len(ours()) == 1 and _libpq._given_up is None
