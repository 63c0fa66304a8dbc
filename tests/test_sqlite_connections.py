"""The set-up every connection to a SQLite file gets (``boson_django.signals``).

Each test opens its own SQLite file, whatever the suite's store: SQLite needs no server.
"""

from __future__ import annotations

import contextlib
import pathlib
import sqlite3
from typing import Any

import pytest
from django.db.utils import ConnectionHandler

#: PRAGMA synchronous as SQLite reports it.
NORMAL, FULL, EXTRA = 1, 2, 3


@pytest.fixture(autouse=True)
def own_files(django_db_blocker):
    """These connections touch no test database, only files of their own."""
    with django_db_blocker.unblock():
        yield


def read(name: str, sql: str, **options: Any) -> Any:
    """The first row of ``sql`` on a new connection to ``name`` with ``options``."""
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": name, "OPTIONS": options}})
    connection = handler["default"]  # a handler of its own: the suite's connections are untouched
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone()
    finally:
        connection.close()


def pragmas(path: pathlib.Path, **options: Any) -> tuple[str, int]:
    """``(journal_mode, synchronous)`` of a new connection to ``path`` with ``options``."""
    return read(str(path), "SELECT * FROM pragma_journal_mode(), pragma_synchronous()", **options)


def test_a_file_gets_wal_and_synchronous_normal(tmp_path):
    assert pragmas(tmp_path / "store.sqlite3") == ("wal", NORMAL)


@pytest.mark.parametrize("init_command, expected", [
    ("PRAGMA synchronous=FULL", FULL),
    ("PRAGMA synchronous=3; PRAGMA cache_size=2000;", EXTRA),  # the example in Django's SQLite notes
    ("pragma main.synchronous = 2", FULL),
])
def test_a_synchronous_the_project_chose_in_init_command_is_kept(tmp_path, init_command, expected):
    """The hook runs after Django's ``init_command`` and set ``NORMAL`` over it: a
    project that asked for ``FULL`` durability (a commit survives a power loss) silently
    had the weaker setting. WAL is still set: several processes need it."""
    assert pragmas(tmp_path / "store.sqlite3", init_command=init_command) == ("wal", expected)


def test_other_init_commands_leave_synchronous_to_boson(tmp_path):
    assert pragmas(tmp_path / "store.sqlite3", init_command="PRAGMA cache_size=2000") == ("wal", NORMAL)


def test_a_database_opened_read_only_is_left_as_it_is(tmp_path):
    """Any SQLite database in DATABASES gets the hook, not only the store: one opened
    read-only (a shipped lookup table, say) failed on every connection with "attempt to
    write a readonly database" once boson_django was installed."""
    path = tmp_path / "lookup.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as made, made:
        made.execute("CREATE TABLE city (name TEXT)")
        made.execute("INSERT INTO city VALUES ('Oslo')")
    name = f"file:{path}?mode=ro"
    assert read(name, "SELECT name FROM city", uri=True) == ("Oslo",)
    assert read(name, "PRAGMA journal_mode", uri=True) == ("delete",)
