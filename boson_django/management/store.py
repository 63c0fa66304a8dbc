"""What every ``boson_*`` command checks of the store before it touches it."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

from boson_django import database, drivers


def checked_alias(using: str | None) -> str:
    """The store's database alias (``--database``, else ``BOSON['DATABASE']``), once it is
    known to be in ``DATABASES`` and to have all of boson_django's migrations.

    Without them every statement fails on a missing table or column: a worker would log
    a database error each tick and retry forever, the other commands end in a traceback.
    A database that cannot be reached is let through: a worker waits for it, and the
    other commands report the connection error themselves."""
    alias = database.alias(using)
    if alias not in connections.settings:
        raise CommandError(f"no database {alias!r} in DATABASES (--database, or BOSON['DATABASE'])")
    try:
        executor = MigrationExecutor(connections[alias])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError:
        return alias
    missing = [migration.name for migration, _ in plan if migration.app_label == "boson_django"]
    if missing and _in_memory(alias):
        name = connections[alias].settings_dict["NAME"]
        raise CommandError(
            f"database {alias!r} is an in-memory SQLite database ({name}), which no other process "
            "shares: this command sees an empty store. Give it a database file; for a worker started "
            f"by a test, name one in DATABASES[{alias!r}]['TEST']['NAME'] (docs/testing.md)"
        )
    if missing:
        raise CommandError(
            f"database {alias!r} lacks boson_django's migrations {', '.join(missing)}: "
            f"run `manage.py migrate --database {alias}` first"
        )
    return alias


def _in_memory(alias: str) -> bool:
    """Whether ``alias`` is an in-memory SQLite database (``:memory:``, or the
    ``mode=memory`` URI Django's test runner gives SQLite without a ``TEST`` name)."""
    connection = connections[alias]
    driver = drivers.known(connection)
    return driver is not None and driver.in_memory(connection)
