"""Engine drivers: each database engine's SQL behind one interface.

The store talks to :class:`~boson_django.drivers.base.Driver`; each engine's package
(:mod:`.postgresql`, :mod:`.sqlite`) holds that engine's statements. This module is the
one place that chooses a driver by ``connection.vendor``: no statement or transaction
above it branches on the engine. Outside the drivers only set-up looks at the engine:
the worker's connection options for every PostgreSQL database of the project
(``worker/network.py``), the SQLite-only system checks, and two migrations.

Layering: :mod:`boson_django.database` (connections and transactions) is below the
drivers; the clock, the models' services and the worker are above.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers.base import Driver

#: The drivers met so far, by ``connection.vendor`` (one dict lookup per call after the first).
_BY_VENDOR: dict[str, Driver] = {}


def for_connection(connection: BaseDatabaseWrapper) -> Driver:
    """The driver of ``connection``'s engine; ``NotImplementedError`` for an engine the
    store does not support."""
    driver = _BY_VENDOR.get(connection.vendor)
    if driver is None:
        driver = _BY_VENDOR[connection.vendor] = _load(connection)
    return driver


def known(connection: BaseDatabaseWrapper) -> Driver | None:
    """:func:`for_connection`, or None for an engine boson_django has no driver for."""
    try:
        return for_connection(connection)
    except NotImplementedError:
        return None


def _load(connection: BaseDatabaseWrapper) -> Driver:
    if connection.vendor == "postgresql":
        from boson_django.drivers.postgresql import DRIVER as postgresql

        return postgresql
    if connection.vendor == "sqlite":
        from boson_django.drivers.sqlite import DRIVER as sqlite

        return sqlite
    raise NotImplementedError(f"boson_django has no driver for {connection.vendor!r} databases")


def for_alias(using: str | None) -> Driver:
    """The driver of the database alias ``using`` (default ``BOSON["DATABASE"]``)."""
    return for_connection(database.conn(using))


def dedicate(connection: BaseDatabaseWrapper, timeouts: Sequence[str] = ()) -> None:
    """:meth:`Driver.dedicate <boson_django.drivers.session.Session.dedicate>` of ``connection``'s driver."""
    for_connection(connection).dedicate(connection, timeouts)


def undedicate(connection: BaseDatabaseWrapper) -> None:
    """:meth:`Driver.undedicate <boson_django.drivers.session.Session.undedicate>` of ``connection``'s driver."""
    for_connection(connection).undedicate(connection)


database.use_drivers(for_connection)

__all__ = ["Driver", "dedicate", "for_alias", "for_connection", "known", "undedicate"]
