"""An enqueue into a database ``migrate`` has not run on raises ``StoreNotMigrated``
naming ``manage.py migrate`` and the alias, instead of ``no such table:
boson_task_config`` (SQLite) or ``relation "boson_task_config" does not exist``
(PostgreSQL) -- an HTTP 500 with no hint in a view.

The store is a second database alias, ``empty``, made for the test: a new SQLite file, or
a new PostgreSQL database named after the test database; the shared one is untouched."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connections, transaction
from django.db.utils import load_backend
from django.test import override_settings

from boson_django import services
from boson_django.errors import StoreError, StoreNotMigrated
from boson_django.services import migrated
from tests import databases
from tests.testapp.tasks import add, report_for

EMPTY = "empty"
TASKS = {
    "default": {"BACKEND": "boson_django.backend.BosonBackend"},
    EMPTY: {"BACKEND": "boson_django.backend.BosonBackend", "OPTIONS": {"database": EMPTY}},
}


@pytest.fixture(scope="module")
def empty_database(django_db_setup, django_db_blocker, tmp_path_factory):
    """The settings of a database with none of boson_django's tables (made once)."""
    with django_db_blocker.unblock():
        default = connections["default"]
        if default.vendor != "postgresql":
            yield {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path_factory.mktemp("empty") / "empty.sqlite3")}
            return
        name = databases.name("empty")
        with default._nodb_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cursor.execute(f'CREATE DATABASE "{name}"')
        try:
            yield {**connections.settings["default"], "NAME": name, "TEST": {}}
        finally:
            databases.drop(name)


@pytest.fixture
def empty_store(db, empty_database):
    """The alias ``empty``, with the backend of the same name enqueueing to it."""
    config = connections.configure_settings({"default": dict(connections.settings["default"]), EMPTY: empty_database})[EMPTY]
    # Made by hand, not listed in DATABASES: Django's test case allows such a connection.
    connections[EMPTY] = load_backend(config["ENGINE"]).DatabaseWrapper(config, EMPTY)
    try:
        with override_settings(TASKS=TASKS):
            yield EMPTY
    finally:
        connections[EMPTY].close()
        del connections[EMPTY]


def _names_migrate(raised: pytest.ExceptionInfo) -> None:
    error = raised.value
    assert isinstance(error, StoreError) and isinstance(error, DatabaseError)
    assert "python manage.py migrate --database empty" in str(error) and "'empty'" in str(error)
    assert "boson_task_config" in error.missing and "boson_job" in error.missing
    assert isinstance(error.__cause__, DatabaseError)  # the driver's own error, kept


def test_enqueue_through_the_tasks_api_names_migrate(empty_store):
    with pytest.raises(StoreNotMigrated) as raised:
        add.using(backend=EMPTY).enqueue(1, 2)
    _names_migrate(raised)
    with pytest.raises(StoreNotMigrated):
        report_for.using(backend=EMPTY).enqueue("north")  # a unique key: another statement


@pytest.mark.parametrize("count", [1, 3, 120], ids=["one", "batch", "copied-batch"])
def test_services_enqueue_names_migrate(empty_store, count):
    batch = [services.Envelope(task=add.module_path, args=[i, i]) for i in range(count)]
    with pytest.raises(StoreNotMigrated) as raised:
        services.enqueue(batch, using=EMPTY)
    _names_migrate(raised)


def test_inside_the_callers_transaction_it_names_migrate_and_the_transaction_goes_on(empty_store):
    """Enqueue joins the caller's transaction as a savepoint: its failure is rolled back to
    it, so the check (and the caller) can still use the transaction."""
    with transaction.atomic(using=EMPTY):
        with pytest.raises(StoreNotMigrated):
            add.using(backend=EMPTY).enqueue(1, 2)
        with connections[EMPTY].cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)


def test_the_default_alias_is_told_plain_migrate():
    assert "run `python manage.py migrate` before" in str(StoreNotMigrated("default", ["boson_job"]))


def test_a_migrated_store_has_no_missing_tables(db):
    """What keeps a database error of a migrated store (a lock timeout, a dropped
    connection) from being taken for a missing migration: it propagates as it is."""
    assert migrated.missing_tables("default") == []
