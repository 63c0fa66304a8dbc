"""An enqueue before ``migrate``: a clear error instead of the driver's ``no such table:
boson_task_config`` (SQLite) or ``relation "boson_task_config" does not exist`` (PostgreSQL).

Asked only after a database error, so an enqueue that works pays nothing for it.
"""

from __future__ import annotations

from django.apps import apps
from django.db import DatabaseError, connections

from boson_django.errors import StoreNotMigrated


def refuse_unmigrated(using: str, error: DatabaseError) -> None:
    """Raise ``StoreNotMigrated`` from ``error`` when boson_django's tables are missing from
    database ``using``; return (the caller raises ``error`` itself) otherwise."""
    missing = missing_tables(using)
    if missing:
        raise StoreNotMigrated(using, missing) from error


def missing_tables(using: str) -> list[str]:
    """boson_django's tables that database ``using`` does not have, by introspection; none
    when the database cannot be asked (it is down: the error that led here says so). The
    connection is usable: the failed statement's transaction, or savepoint, is rolled back."""
    connection = connections[using]
    try:
        with connection.cursor() as cursor:
            present = set(connection.introspection.table_names(cursor))
    except DatabaseError:
        return []
    return sorted({model._meta.db_table for model in apps.get_app_config("boson_django").get_models()} - present)
