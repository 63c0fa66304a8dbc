"""Engine drivers: each database engine's SQL behind one interface.

The store talks to :class:`~boson_django.drivers.base.Driver`; each engine's package
(:mod:`.postgresql`, :mod:`.sqlite`) holds that engine's statements. This module is the
one place that chooses by ``connection.vendor``; nothing above it branches on the engine.

Layering: :mod:`boson_django.database` (connections and transactions) is below the
drivers; the clock, the models' services and the worker are above.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django.drivers.base import Driver


def for_connection(connection: BaseDatabaseWrapper) -> Driver:
    """The driver of ``connection``'s engine; ``NotImplementedError`` for an engine the
    store does not support."""
    if connection.vendor == "postgresql":
        from boson_django.drivers.postgresql import DRIVER as postgresql

        return postgresql
    if connection.vendor == "sqlite":
        from boson_django.drivers.sqlite import DRIVER as sqlite

        return sqlite
    raise NotImplementedError(f"boson_django has no driver for {connection.vendor!r} databases")


def for_alias(using: str | None) -> Driver:
    """The driver of the database alias ``using`` (default ``BOSON["DATABASE"]``)."""
    from boson_django import database

    return for_connection(database.conn(using))


__all__ = ["Driver", "for_alias", "for_connection"]
