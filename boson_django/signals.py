"""Connection set-up: each new connection of an engine boson_django drives gets that
engine's set-up (:meth:`~boson_django.drivers.session.Session.connected`)."""

from __future__ import annotations

from typing import Any

from django.db.backends.signals import connection_created
from django.dispatch import receiver

from boson_django import drivers


@receiver(connection_created)
def tune_sqlite(sender: Any, connection: Any, **kwargs: Any) -> None:
    """The engine's set-up of a new connection (SQLite: WAL); nothing for an engine
    boson_django has no driver for (another database of the project)."""
    driver = drivers.known(connection)
    if driver is not None:
        driver.connected(connection)
