"""Connection set-up that SQLite needs for several worker processes on one file."""

from __future__ import annotations

from typing import Any

from django.db.backends.signals import connection_created
from django.dispatch import receiver


@receiver(connection_created)
def tune_sqlite(sender: Any, connection: Any, **kwargs: Any) -> None:
    """WAL lets readers run beside the one writer, so workers polling never block an ack.

    Waiting for the write lock is left to Django's ``OPTIONS["timeout"]`` (busy timeout);
    store transactions also retry a bounded number of times (``SQLITE_BUSY_RETRIES``).
    """
    if connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or ":memory:" in name or "mode=memory" in name:
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
