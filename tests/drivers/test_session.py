"""The driver's sessions and transactions, the same tests on every engine (``BOSON_TEST_DB``)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, OperationalError, connection, transaction

from boson_django import database, drivers
from boson_django.models import Queue


@pytest.fixture
def driver(db):
    return drivers.for_connection(connection)


def test_for_connection_gives_the_engine_s_driver_and_registers_it_with_database(driver):
    assert driver.vendor == connection.vendor
    assert database.driver_of(connection) is driver


def test_one_statement_returns_rows_as_dicts(driver):
    assert driver.one_statement(connection, "SELECT 41 + %s AS n", [1]) == [{"n": 42}]


def test_one_statement_that_fails_writes_nothing(driver):
    insert = "INSERT INTO boson_queue (name, paused) VALUES (%s, %s), (%s, %s)"
    with pytest.raises(DatabaseError), transaction.atomic():
        driver.one_statement(connection, insert, ["q", False, "q", False])
    assert not Queue.objects.filter(name="q").exists()


def test_max_list_bounds_a_statement_and_shrinks_with_each_item_s_parameters(driver):
    one = driver.max_list(connection)
    assert one >= 1
    assert driver.max_list(connection, each=5) <= one
    assert driver.max_list(connection, each=5, besides=8) >= 1


def test_a_statement_of_max_list_items_runs(driver):
    size = min(driver.max_list(connection, each=1, besides=0), 5000)
    names = [f"q{i}" for i in range(size)]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM boson_queue WHERE name IN ({database.placeholders(names)})", names)
        assert cursor.fetchone()[0] == 0


def test_busy_is_only_another_writer_s_lock(driver):
    assert not driver.is_busy(OperationalError("no such table: boson_job"))
    assert driver.busy_retries(connection) >= 0


def test_begin_immediate_does_nothing_inside_the_caller_s_transaction(driver):
    with transaction.atomic():
        mode = getattr(connection, "transaction_mode", None)
        with driver.begin_immediate(connection):
            assert getattr(connection, "transaction_mode", None) == mode


def test_dedicate_marks_the_connection_and_undedicate_gives_it_back(driver):
    drivers.dedicate(connection, ["statement_timeout = 1234"])
    try:
        assert connection.boson_dedicated
    finally:
        drivers.undedicate(connection)
    assert not connection.boson_dedicated
    assert connection.boson_timeouts == ()


def test_store_transaction_commits_once_and_joins_the_caller_s(driver):
    @database.store_transaction
    def make(name: str, *, using: str | None = None) -> bool:
        Queue.objects.using(using).create(name=name)
        return connection.in_atomic_block

    with transaction.atomic():
        assert make("inside")
    assert make("alone")
    assert set(Queue.objects.values_list("name", flat=True)) >= {"inside", "alone"}


def test_store_transaction_rolls_back_all_of_a_failed_call(driver):
    @database.store_transaction
    def make_then_fail(*, using: str | None = None) -> None:
        Queue.objects.using(using).create(name="lost")
        raise ValueError("boom")

    with pytest.raises(ValueError):
        make_then_fail()
    assert not Queue.objects.filter(name="lost").exists()

