"""The set-up every connection to a SQLite file gets (``boson_django.signals``).

Each test opens its own SQLite file, whatever the suite's store: SQLite needs no server.
"""

from __future__ import annotations

import pathlib
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


def pragmas(path: pathlib.Path, **options: Any) -> tuple[str, int]:
    """``(journal_mode, synchronous)`` of a new connection to ``path`` with ``options``."""
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path), "OPTIONS": options}})
    connection = handler["default"]  # a handler of its own: the suite's connections are untouched
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            (journal,) = cursor.fetchone()
            cursor.execute("PRAGMA synchronous")
            (synchronous,) = cursor.fetchone()
    finally:
        connection.close()
    return journal, synchronous


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
