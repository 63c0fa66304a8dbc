"""SQLite connection set-up: several worker processes on one file."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError


def tune(connection: Any) -> None:
    """WAL lets readers run beside the one writer, so workers polling never block an ack.

    Waiting for the write lock is left to Django's ``OPTIONS["timeout"]`` (busy timeout);
    store transactions also retry a bounded number of times (``SQLITE_BUSY_RETRIES``).
    """
    if not connection.settings_dict.get("NAME") or connection.is_in_memory_db():
        return
    with connection.cursor() as cursor:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except DatabaseError as exc:
            if _read_only(exc):
                return
            raise
        if not _sets_synchronous(connection):
            cursor.execute("PRAGMA synchronous=NORMAL")


def _read_only(exc: DatabaseError) -> bool:
    """A database opened read-only (``"NAME": "file:...?mode=ro"`` with ``OPTIONS["uri"]``,
    or a file the process may not write) cannot change its journal mode: the PRAGMA failed
    with "attempt to write a readonly database", and so did every connection to it -- any
    SQLite database in ``DATABASES``, not only the store, once boson_django was installed.
    Nothing writes there, so nothing needs WAL: it is left as it is."""
    return "readonly" in str(exc).lower()


def _sets_synchronous(connection: Any) -> bool:
    """Whether the project's ``OPTIONS["init_command"]`` chose ``synchronous`` itself.

    ``NORMAL`` (WAL's usual pairing) spares an fsync per commit, at the price of the last
    commits on a power loss or an OS crash; a project that asked for ``FULL`` or ``EXTRA``
    (as Django's own SQLite notes suggest) chose the other side of that trade, and this
    hook, which runs after the ``init_command``, overrode it without a word.
    """
    commands = str((connection.settings_dict.get("OPTIONS") or {}).get("init_command") or "")
    return any(_pragma_name(command) == "synchronous" for command in commands.split(";"))


def _pragma_name(command: str) -> str:
    """``synchronous`` of ``PRAGMA main.synchronous = 3`` (lower case; '' for other commands)."""
    words = command.strip().lower().split(None, 1)
    if len(words) < 2 or words[0] != "pragma":
        return ""
    return words[1].split("=", 1)[0].split("(", 1)[0].strip().rsplit(".", 1)[-1].strip()
