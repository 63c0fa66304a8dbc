"""What a worker's connections are given so that the network cannot hang it: libpq
options (connect timeout, keepalives) under the project's own, the store's timeouts on
its dedicated connections only, and a watchdog that breaks a connection whose answer is
overdue. The scenarios with a broken network are in tests/faults/test_network.py."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import DatabaseError, connection, connections
from django.test import override_settings

from boson_django import checks
from boson_django import database
from boson_django import drivers
from boson_django.worker import network
from boson_django.worker.watchdog import Watchdog
from tests.testapp import fault_tasks
from tests.worker.conftest import ThreadWorker, state, wait_until


def test_the_projects_own_options_win_and_none_leaves_a_default_out():
    project = {"NAME": "shop", "OPTIONS": {"connect_timeout": 20, "sslmode": "require"}}
    with override_settings(BOSON={"CONNECTION_OPTIONS": {"keepalives_idle": 30, "tcp_user_timeout": None}}):
        merged = network.with_options(project)
    assert merged["OPTIONS"] == {"connect_timeout": 20, "sslmode": "require", "keepalives": 1, "keepalives_idle": 30,
                                 "keepalives_interval": 5, "keepalives_count": 3}
    assert project["OPTIONS"] == {"connect_timeout": 20, "sslmode": "require"}  # a copy: the project's is untouched


def test_the_store_timeouts_replace_their_defaults_one_by_one():
    with override_settings(BOSON={"STORE_TIMEOUTS": {"lock_timeout": 500, "idle_in_transaction_session_timeout": None}}):
        assert network.store_timeouts() == ["lock_timeout = 500", "statement_timeout = 30000"]


@pytest.mark.parametrize(("boson", "fragment"), [
    ({"CONNECTION_OPTIONS": {"keepalives_idle": -1}}, "BOSON['CONNECTION_OPTIONS'] must give each libpq parameter a whole number >= 0, a string or None, got 'keepalives_idle': -1"),
    ({"CONNECTION_OPTIONS": {"connect timeout": 2}}, "BOSON['CONNECTION_OPTIONS'] must name libpq parameters"),
    ({"CONNECTION_OPTIONS": [("connect_timeout", 2)]}, "BOSON['CONNECTION_OPTIONS'] must be dict"),
    ({"STORE_TIMEOUTS": {"statement_timout": 10}}, "BOSON['STORE_TIMEOUTS'] names 'statement_timout', which is not"),
    ({"STORE_TIMEOUTS": {"lock_timeout": "5s"}}, "BOSON['STORE_TIMEOUTS'] must give each timeout milliseconds (0 to 2147483647, 0: none) or None, got 'lock_timeout'"),
    ({"REPLY_TIMEOUT_MS": -1}, "BOSON['REPLY_TIMEOUT_MS'] must be >= 0"),
])
def test_bad_network_settings_are_reported_by_name(boson, fragment):
    with override_settings(BOSON=boson):
        messages = [m.msg for m in checks.check_settings()]
    assert any(fragment in msg for msg in messages), messages


def _sleep_on_the_server() -> None:
    """A statement that answers in 20 s; its backend ended once the test is done with it."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(20)")
    finally:
        connection.close()
        with connection.cursor() as cursor:  # the server still runs it: no one told it
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def _show(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


@pytest.mark.postgres
def test_a_dedicated_connection_runs_under_the_store_timeouts_and_gives_them_back(live_clock):
    drivers.dedicate(connection, ["statement_timeout = 1234", "lock_timeout = 567"])
    try:
        assert (_show("statement_timeout"), _show("lock_timeout")) == ("1234ms", "567ms")
        connection.close()  # a new session gets them too
        assert _show("statement_timeout") == "1234ms"
    finally:
        drivers.undedicate(connection)
    assert (_show("statement_timeout"), _show("lock_timeout")) == ("0", "0")


@pytest.mark.postgres
def test_behind_a_transaction_pooler_the_timeouts_hold_for_each_store_transaction_only(live_clock):
    @database.store_transaction
    def inside(*, using=None):
        return _show("statement_timeout")

    with override_settings(BOSON={"PREPARED_STATEMENTS": False}):
        drivers.dedicate(connection, ["statement_timeout = 1234"])
        try:
            assert _show("statement_timeout") == "0"  # nothing kept in the (pooled) session
            assert inside() == "1234ms"
            assert _show("statement_timeout") == "0"
        finally:
            drivers.undedicate(connection)


@pytest.mark.postgres
def test_a_handlers_connection_gets_a_connect_timeout_and_keepalives(live_clock):
    result = fault_tasks.connection_parameters.enqueue()
    with ThreadWorker():
        wait_until(lambda: state(result.id) == "completed", what="the job")
    got = fault_tasks.connection_parameters.get_result(result.id).return_value
    assert {k: got.get(k) for k in ("connect_timeout", "keepalives_idle", "keepalives_count", "tcp_user_timeout")} == {
        "connect_timeout": "5", "keepalives_idle": "10", "keepalives_count": "3", "tcp_user_timeout": "30000"}


@pytest.mark.postgres
def test_the_watchdog_breaks_a_connection_whose_answer_is_overdue(live_clock):
    dog = Watchdog()
    watch = dog.watch(connections["default"])  # this thread's wrapper (the proxy would be the watchdog's)
    began = time.monotonic()
    try:
        with pytest.raises(DatabaseError), watch.armed(0.3):
            _sleep_on_the_server()
    finally:
        dog.stop()
    assert time.monotonic() - began < 10
    wait_until(lambda: dog.broken == 1, what="the watchdog to count the break")


@pytest.mark.postgres
def test_once_the_grace_is_over_a_call_in_flight_is_broken_whatever_its_deadline(live_clock):
    stop_at: list[float] = []
    dog = Watchdog(stop_at=lambda: stop_at[0] if stop_at else None)
    watch = dog.watch(connections["default"])
    threading.Timer(0.3, lambda: stop_at.append(time.monotonic())).start()
    began = time.monotonic()
    try:
        with pytest.raises(DatabaseError), watch.armed(None):
            _sleep_on_the_server()
    finally:
        dog.stop()
    assert time.monotonic() - began < 10
    wait_until(lambda: dog.broken == 1, what="the watchdog to count the break")
