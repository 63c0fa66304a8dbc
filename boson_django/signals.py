"""Connection set-up that SQLite needs for several worker processes on one file."""

from __future__ import annotations

from typing import Any

from django.db.backends.signals import connection_created
from django.dispatch import receiver

from boson_django import conf


@receiver(connection_created)
def tune_sqlite(sender: Any, connection: Any, **kwargs: Any) -> None:
    """WAL lets readers run beside the one writer; busy_timeout makes writers wait, not fail."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        name = connection.settings_dict.get("NAME") or ""
        if name and ":memory:" not in str(name) and "mode=memory" not in str(name):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        timeout_ms = int(float(connection.settings_dict.get("OPTIONS", {}).get("timeout", 20)) * 1000)
        cursor.execute(f"PRAGMA busy_timeout={max(timeout_ms, conf.get().LEASE_MS // 10):d}")
