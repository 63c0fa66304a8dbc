"""``session.one_statement`` with planner settings: ``BEGIN`` and ``SET LOCAL`` in one message,
the prepared statement, ``COMMIT`` -- the settings hold for the statement only, and a
failed statement leaves the connection out of any transaction, settings undone. On a
connection the worker dedicated to its own statements the settings hold for the session
and the statement runs alone."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from boson_django import drivers
from boson_django.drivers.postgresql import session

pytestmark = pytest.mark.postgres

SETTING = "SELECT current_setting('enable_bitmapscan') AS v, pg_current_xact_id_if_assigned() IS NULL AS unwritten"


def _idle_with_defaults() -> None:
    raw = connection.connection
    assert raw.info.transaction_status == 0, "left inside a transaction"
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_bitmapscan")
        assert cursor.fetchone()[0] == "on"


def test_the_settings_hold_for_the_statement_and_end_with_its_commit(transactional_db):
    connection.ensure_connection()
    rows = session.one_statement(connection, SETTING, [], planner=("enable_bitmapscan = off",))
    assert rows == [{"v": "off", "unwritten": True}]
    _idle_with_defaults()


def test_a_failed_statement_rolls_back_and_leaves_no_setting_behind(transactional_db):
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE one_stmt (n int)")
    failing = "WITH w AS (INSERT INTO one_stmt VALUES (1) RETURNING n) SELECT n / 0 AS x FROM w"
    with pytest.raises(DatabaseError):
        session.one_statement(connection, failing, [], planner=("enable_bitmapscan = off",))
    _idle_with_defaults()
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM one_stmt")
        assert cursor.fetchone()[0] == 0  # the insert went with the rollback


def test_inside_the_caller_s_transaction_it_joins_it_with_the_settings_for_the_statement_alone(transactional_db):
    from django.db import transaction

    with transaction.atomic():
        rows = session.one_statement(connection, SETTING, [], planner=("enable_bitmapscan = off",))
        assert rows[0]["v"] == "off"  # in force for the statement
        with connection.cursor() as cursor:
            cursor.execute(SETTING)
            assert cursor.fetchone()[0] == "on"  # the caller's again for the rest of its transaction
    _idle_with_defaults()


ALONE = "SELECT current_setting('enable_bitmapscan') AS v"
PLANNER = ("enable_bitmapscan = off",)


@pytest.fixture
def dedicated(transactional_db):
    connection.ensure_connection()
    drivers.dedicate(connection)
    yield connection
    drivers.undedicate(connection)


def _session_setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_bitmapscan")
        return cursor.fetchone()[0]


def test_a_dedicated_connection_keeps_the_settings_for_its_session(dedicated):
    assert session.one_statement(dedicated, ALONE, [], planner=PLANNER) == [{"v": "off"}]
    assert _session_setting() == "off"  # set for the session: the statement ran alone, no SET LOCAL
    assert session.one_statement(dedicated, ALONE, [], planner=PLANNER) == [{"v": "off"}]
    assert connection.connection.info.transaction_status == 0


def test_a_new_database_connection_gets_the_settings_again(dedicated):
    session.one_statement(dedicated, ALONE, [], planner=PLANNER)
    dedicated.close()  # what the worker does after a database error
    dedicated.ensure_connection()
    assert _session_setting() == "on"
    assert session.one_statement(dedicated, ALONE, [], planner=PLANNER) == [{"v": "off"}]
    assert _session_setting() == "off"


def test_giving_the_connection_back_resets_the_settings(dedicated):
    session.one_statement(dedicated, ALONE, [], planner=PLANNER)
    drivers.undedicate(dedicated)
    _idle_with_defaults()
    assert session.one_statement(dedicated, ALONE, [], planner=PLANNER) == [{"v": "off"}]
    _idle_with_defaults()  # back to BEGIN + SET LOCAL


def test_without_prepared_statements_a_pooler_may_share_the_session_so_nothing_is_set_on_it(dedicated, settings):
    from django.test import override_settings

    with override_settings(BOSON={**settings.BOSON, "PREPARED_STATEMENTS": False}):
        assert session.one_statement(dedicated, ALONE, [], planner=PLANNER) == [{"v": "off"}]
    _idle_with_defaults()
