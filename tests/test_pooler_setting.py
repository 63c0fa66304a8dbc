"""``BOSON["POOLER"] = "transaction"``: nothing that needs a session of its own is used
behind a pooler in transaction mode -- prepared statements off (True refused at start-up),
no session settings, the worker polling instead of LISTENing, with a clear message. Runs
through a real PgBouncer are in tests/faults/test_pgbouncer.py."""

from __future__ import annotations

import logging

import pytest
from django.core import checks
from django.db import connection
from django.test import override_settings

from boson_django import conf
from boson_django import drivers
from boson_django.drivers.postgresql import session
from boson_django.worker.runtime import Worker, WorkerOptions

BASE = {"TASK_MODULES": ["tests.testapp.more_tasks"]}


def boson_messages(**values) -> list[checks.CheckMessage]:
    with override_settings(BOSON={**BASE, **values}):
        return [m for m in checks.run_checks(tags=["boson"]) if (m.id or "").startswith("boson.")]


@pytest.fixture
def server_side_cursors(monkeypatch):
    """``server_side_cursors(False)``: the store database's DISABLE_SERVER_SIDE_CURSORS."""
    from django.db import connections

    def set_disabled(disabled: bool) -> None:
        monkeypatch.setitem(connections.settings["default"], "DISABLE_SERVER_SIDE_CURSORS", disabled)

    return set_disabled


def test_prepared_statements_are_off_behind_a_transaction_pooler_even_when_set():
    with override_settings(BOSON={"POOLER": "transaction"}):
        assert conf.get().PREPARED_STATEMENTS is False
    with override_settings(BOSON={"POOLER": "transaction", "PREPARED_STATEMENTS": True}):
        assert conf.get().PREPARED_STATEMENTS is False
    for pooler in (None, "session"):
        with override_settings(BOSON={"POOLER": pooler}):
            assert conf.get().PREPARED_STATEMENTS is True


def test_prepared_statements_set_true_behind_a_transaction_pooler_are_refused_naming_both_keys(server_side_cursors):
    server_side_cursors(True)
    (message,) = boson_messages(POOLER="transaction", PREPARED_STATEMENTS=True)
    assert message.id == "boson.E011" and message.level == checks.ERROR
    assert "BOSON['PREPARED_STATEMENTS'] = True" in message.msg and "BOSON['POOLER'] = 'transaction'" in message.msg
    assert boson_messages(POOLER="transaction") == []
    assert boson_messages(POOLER="transaction", PREPARED_STATEMENTS=False, NOTIFY=False) == []
    assert boson_messages(POOLER="session", PREPARED_STATEMENTS=True) == []


def test_server_side_cursors_left_on_behind_a_transaction_pooler_are_reported(server_side_cursors):
    server_side_cursors(False)
    (message,) = boson_messages(POOLER="transaction")
    assert message.id == "boson.W004" and "DISABLE_SERVER_SIDE_CURSORS" in message.hint
    assert boson_messages(POOLER="session") == []


@pytest.mark.django_db
@pytest.mark.parametrize("pooler, listens", [(None, True), ("session", True), ("transaction", False)])
def test_a_worker_behind_a_transaction_pooler_polls_and_says_why(pooler, listens, caplog):
    if connection.vendor != "postgresql":
        listens = False  # SQLite never listens
    with override_settings(BOSON={**BASE, "POOLER": pooler}), caplog.at_level(logging.WARNING, "boson_django"):
        assert Worker(WorkerOptions(handle_signals=False, poll_interval_ms=700))._use_notify() is listens
    said = [r.getMessage() for r in caplog.records if "LISTEN needs a session" in r.getMessage()]
    if pooler == "transaction" and connection.vendor == "postgresql":
        assert len(said) == 1 and "polls every 700 ms" in said[0], said
    else:
        assert said == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_no_session_setting_is_kept_behind_a_transaction_pooler():
    """A worker's dedicated connection keeps the claim's planner setting for its session
    -- unless the session may be handed to another client."""
    connection.ensure_connection()
    drivers.dedicate(connection)
    try:
        with override_settings(BOSON={**BASE, "POOLER": "transaction"}):
            session.one_statement(connection, "SELECT %s::int AS n", [1], planner=["enable_seqscan = off"])
            assert getattr(connection, "boson_session_settings", None) is None
            with connection.cursor() as cursor:
                cursor.execute("SHOW enable_seqscan")
                assert cursor.fetchone()[0] == "on"
        session.one_statement(connection, "SELECT %s::int AS n", [1], planner=["enable_seqscan = off"])
        with connection.cursor() as cursor:
            cursor.execute("SHOW enable_seqscan")
            assert cursor.fetchone()[0] == "off"  # directly connected, it is kept
    finally:
        drivers.undedicate(connection)
