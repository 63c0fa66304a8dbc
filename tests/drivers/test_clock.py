"""The driver's store clock, the same tests on every engine (``BOSON_TEST_DB``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection

from boson_django import clock, drivers
from boson_django.models import StoreClock

AT = datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=timezone.utc)


@pytest.fixture
def driver(db):
    yield drivers.for_connection(connection)
    clock.unfreeze()


def test_now_reads_a_frozen_clock(driver):
    driver.write_clock(connection, AT, 0)
    assert driver.now(connection) == AT


def test_now_is_aware_utc(driver):
    driver.write_clock(connection, AT, 0)
    assert driver.now(connection).utcoffset() == timedelta(0)


def test_now_adds_the_offset_to_a_running_clock(driver):
    driver.write_clock(connection, None, 3_600_000)
    shifted = driver.now(connection) - datetime.now(timezone.utc)
    assert timedelta(minutes=59) < shifted < timedelta(minutes=61)


def test_now_without_a_clock_row_is_the_engine_s_own_time(driver):
    StoreClock.objects.all().delete()
    assert driver.clock_row(connection) == (None, 0)
    assert abs(driver.now(connection) - datetime.now(timezone.utc)) < timedelta(minutes=1)


def test_write_clock_creates_the_row_once_and_is_idempotent(driver):
    StoreClock.objects.all().delete()
    driver.write_clock(connection, AT, 0)
    driver.write_clock(connection, AT, 0)
    assert StoreClock.objects.count() == 1
    assert driver.clock_row(connection) == (AT, 0)


def test_write_clock_replaces_a_frozen_time_by_an_offset(driver):
    driver.write_clock(connection, AT, 0)
    driver.write_clock(connection, None, 5)
    assert driver.clock_row(connection) == (None, 5)


def test_advance_steps_a_frozen_clock_by_exactly_its_milliseconds(driver):
    clock.freeze(AT)
    clock.advance(1500)
    assert driver.now(connection) == AT + timedelta(milliseconds=1500)


def test_the_inline_store_time_agrees_with_now_where_the_engine_has_one(driver):
    try:
        sql = driver.store_now_sql()
    except NotImplementedError:
        pytest.skip(f"{driver!r} reads the store time in Python")
    driver.write_clock(connection, AT, 0)
    with connection.cursor() as cursor:
        cursor.execute(sql)
        inline = cursor.fetchone()[0]
    assert inline == driver.now(connection)
