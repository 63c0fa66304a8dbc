"""Checks of where the store lives: ``USE_TZ``, the database Django's routers send the
models to, and SQLite's transaction mode and time zone, and a transaction pooler's
server-side cursors."""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.db import connections

from boson_django import conf


@checks.register("boson")
def check_time_zone_support(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every time boson keeps (due times, leases, rate windows, retention) is an aware UTC
    time compared with the database's clock; with ``USE_TZ = False`` Django's backends
    refuse or mix them, and the first enqueue failed with an error naming neither."""
    if django_settings.USE_TZ:
        return []
    return [checks.Error(
        "boson_django needs USE_TZ = True (Django's default since 5.0): the queue keeps its times "
        "in UTC and compares them with the database's clock.",
        hint="Set USE_TZ = True in your settings.", id="boson.E006",
    )]


@checks.register("boson")
def check_store_routing(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``BOSON["DATABASE"]`` is where the services keep the store; the admin and
    ``migrate`` go where Django's routers send boson_django's models. Apart, the admin
    showed (and acted on) another database's jobs, with no error anywhere."""
    from django.db import router

    from boson_django.models import Job

    database = _store_alias()
    routed = router.db_for_read(Job)
    if database is None or routed == database:
        return []
    return [checks.Warning(
        f"BOSON['DATABASE'] is {database!r}, but Django routes boson_django's models to {routed!r}: "
        "the admin's pages and `migrate` use that database, the workers and services this one.",
        hint="Add 'boson_django.routers.StoreRouter' to DATABASE_ROUTERS (before a router that "
             "routes every model), then run "
             f"`manage.py migrate --database {database}`.",
        id="boson.W001",
    )]


@checks.register("boson")
def check_sqlite_transaction_mode(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Boson begins its own transactions IMMEDIATE on SQLite, but an enqueue joins the
    caller's: in a ``transaction.atomic()`` Django began DEFERRED, the enqueue's write has
    to upgrade a read lock, and SQLite refuses that at once ("database is locked", no
    waiting) while a worker writes -- a view that enqueued failed with a 500."""
    database, found = _sqlite_store()
    if not found or _takes_write_lock_at_begin((found.get("OPTIONS") or {}).get("transaction_mode")):
        return []
    return [checks.Warning(
        f"The store's database {database!r} is SQLite without \"transaction_mode\": \"IMMEDIATE\": "
        "an enqueue inside your transaction.atomic() fails with 'database is locked' whenever a "
        "worker is writing at that moment.",
        hint=f'Add "OPTIONS": {{"timeout": 20, "transaction_mode": "IMMEDIATE"}} to DATABASES[{database!r}].',
        id="boson.W002",
    )]


def _takes_write_lock_at_begin(mode: Any) -> bool:
    """Django takes the mode in any case (it upper-cases it), and EXCLUSIVE is IMMEDIATE
    in WAL mode: both begin with the write lock, so an enqueue never upgrades to it.
    Only ``"IMMEDIATE"`` as spelt in the hint passed: ``"immediate"`` was warned about."""
    return isinstance(mode, str) and mode.upper() in ("IMMEDIATE", "EXCLUSIVE")


@checks.register("boson")
def check_sqlite_time_zone(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """On SQLite Django writes times as text in the database's ``TIME_ZONE`` when one is
    set; boson compares them as text in its statements and reads them back as UTC. In
    another zone every time read back was shifted by its offset -- a frozen store clock
    read five hours early in New York, due times and leases with it -- and local times
    repeat at a daylight-saving fall-back, so their order is not time's."""
    database, found = _sqlite_store()
    if not found or _is_utc(found.get("TIME_ZONE")):
        return []
    return [checks.Error(
        f"The store's database {database!r} is SQLite with TIME_ZONE {found['TIME_ZONE']!r}: "
        "boson_django keeps its times in UTC there, and would read every one shifted.",
        hint=f'Remove "TIME_ZONE" from DATABASES[{database!r}] (or set it to "UTC"), or give the '
             "queue a database of its own with BOSON['DATABASE'].",
        id="boson.E010",
    )]


def _is_utc(name: Any) -> bool:
    """Whether a ``TIME_ZONE`` is UTC under any of its names (``Etc/UTC``, ``GMT``, ...):
    no offset from before 1900 to after 2030, summer and winter."""
    if name is None or name == "UTC":
        return True
    try:
        zone = zoneinfo.ZoneInfo(str(name))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return all(zone.utcoffset(datetime(year, month, 1)) == timedelta(0)
               for year in (1890, 1950, 1970, 2000, 2030) for month in (1, 7))


def _sqlite_store() -> tuple[str | None, dict[str, Any] | None]:
    """The store's alias and its ``DATABASES`` entry when the store is SQLite (else None)."""
    database = _store_alias()
    found = connections.settings.get(database) if database is not None else None
    if not found or not str(found.get("ENGINE", "")).endswith("sqlite3"):
        return database, None
    return database, found


def _store_alias() -> str | None:
    """The store's alias as configured (``default`` unless ``BOSON["DATABASE"]`` says
    otherwise); None for a bad ``BOSON`` or alias, which ``check_settings`` names."""
    raw = getattr(django_settings, "BOSON", None)
    if raw is not None and not isinstance(raw, dict):
        return None
    database = (raw or {}).get("DATABASE", "default")
    return database if isinstance(database, str) and database in connections.settings else None


@checks.register("boson")
def check_server_side_cursors(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Behind a transaction pooler, a store database whose server-side cursors Django
    keeps on is reported (Django's own advice for such poolers): a ``QuerySet.iterator()``
    would open its cursor in one server session and read it in another."""
    user = conf.user_settings() if isinstance(getattr(django_settings, "BOSON", None), dict) else {}
    database = _store_alias()
    if user.get("POOLER") != conf.TRANSACTION_POOLER or database is None:
        return []
    if connections.settings[database].get("DISABLE_SERVER_SIDE_CURSORS"):
        return []
    return [checks.Warning(
        f"BOSON['POOLER'] is 'transaction' but DATABASES[{database!r}] keeps server-side cursors on: "
        "a QuerySet.iterator() would open a cursor in one server session and read it in another.",
        hint=f"Set DATABASES[{database!r}]['DISABLE_SERVER_SIDE_CURSORS'] = True.", id="boson.W004",
    )]
