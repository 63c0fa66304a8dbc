"""A fresh demo database for every run: delete the SQLite file, or drop and create the
PostgreSQL database (only the demo's own database, named in settings)."""

from __future__ import annotations

import os
from typing import Any

from django.db import connections


def describe() -> str:
    settings = connections["default"].settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        return f"SQLite {settings['NAME']}"
    return f"PostgreSQL {settings['NAME']} on {settings['HOST']}:{settings['PORT']}"


def reset() -> None:
    connections.close_all()
    settings = connections["default"].settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(str(settings["NAME"]) + suffix):
                os.remove(str(settings["NAME"]) + suffix)
    else:
        _recreate_postgres(settings)


def _recreate_postgres(settings: dict[str, Any]) -> None:
    import psycopg
    from psycopg import sql

    params = {"dbname": "postgres", "user": settings["USER"], "host": settings["HOST"], "port": settings["PORT"]}
    if settings.get("PASSWORD"):
        params["password"] = settings["PASSWORD"]
    name = sql.Identifier(settings["NAME"])
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
