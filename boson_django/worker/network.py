"""What a worker's PostgreSQL connections are given so that the network can never hang it.

* Every connection the worker opens -- its loop's, its ack thread's, its ``LISTEN``
  connection, and those its handler threads open -- gets a connect timeout and TCP
  keepalives (``BOSON["CONNECTION_OPTIONS"]``, libpq parameters), merged under the
  database's ``OPTIONS``: what the project set there wins.
* The store's own statements, on the worker's own connections (loop and ack thread), run
  under ``statement_timeout``, ``lock_timeout`` and ``idle_in_transaction_session_timeout``
  (``BOSON["STORE_TIMEOUTS"]``): set for the session of a direct connection, or with
  ``SET LOCAL`` in each transaction the store opens when ``PREPARED_STATEMENTS`` is off
  (a pooler in transaction mode hands the session to other clients). Never on a
  handler's connection: the project's own queries are not boson's to bound.

A server that stops answering altogether (a half-open connection, a black hole) answers
no timeout of its own: :mod:`.watchdog` breaks a connection whose answer is overdue.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import conf

#: libpq parameters given to every worker connection, unless the setting or the
#: project's ``OPTIONS`` say otherwise (``None`` in the setting leaves one out):
#: ``connect_timeout`` in seconds (libpq's least is 2), keepalive probes after
#: ``keepalives_idle`` seconds idle, every ``keepalives_interval`` seconds, dead after
#: ``keepalives_count`` unanswered; ``tcp_user_timeout``: ms sent data may stay unacknowledged.
CONNECTION_DEFAULTS: dict[str, Any] = conf.DEFAULTS["CONNECTION_OPTIONS"]

#: Server-side timeouts of the store's own statements, in milliseconds (0: none).
TIMEOUT_DEFAULTS: dict[str, Any] = conf.DEFAULTS["STORE_TIMEOUTS"]


def connection_options() -> dict[str, Any]:
    """The libpq parameters a worker connection gets (the defaults and the setting's)."""
    merged = {**CONNECTION_DEFAULTS, **conf.get().CONNECTION_OPTIONS}
    return {key: value for key, value in merged.items() if value is not None}


def store_timeouts() -> list[str]:
    """``name = value`` settings for the store's own statements."""
    merged = {**TIMEOUT_DEFAULTS, **conf.get().STORE_TIMEOUTS}
    return [f"{name} = {int(value)}" for name, value in sorted(merged.items()) if value is not None]


def with_options(settings_dict: dict[str, Any]) -> dict[str, Any]:
    """A copy of a Django database's settings with :func:`connection_options` under its
    ``OPTIONS`` (the project's own values kept)."""
    options = settings_dict.get("OPTIONS") or {}
    return {**settings_dict, "OPTIONS": {**connection_options(), **options}}


def harden(connection: BaseDatabaseWrapper) -> None:
    """Give this thread's wrapper of a PostgreSQL alias the worker's connection options,
    from its next connection on (the settings of other threads' wrappers are untouched);
    :func:`soften` takes them back."""
    if connection.vendor != "postgresql" or getattr(connection, "boson_plain_settings", None) is not None:
        return
    connection.boson_plain_settings = connection.settings_dict  # type: ignore[attr-defined]
    connection.settings_dict = with_options(connection.settings_dict)


def harden_all() -> None:
    """:func:`harden` this thread's wrapper of every PostgreSQL database (a handler's thread)."""
    for alias, settings_dict in connections.settings.items():
        if settings_dict.get("ENGINE", "").endswith(("postgresql", "postgis")):
            harden(connections[alias])


def soften(connection: BaseDatabaseWrapper) -> None:
    plain = getattr(connection, "boson_plain_settings", None)
    if plain is not None:
        connection.settings_dict = plain
        connection.boson_plain_settings = None  # type: ignore[attr-defined]
