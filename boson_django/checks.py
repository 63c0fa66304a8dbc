"""System checks: a bad ``BOSON`` value is reported at start-up, naming the key; a
module of tasks that does not import, naming the module; ``USE_TZ = False``; and a store
that would read its times back shifted (SQLite with a ``TIME_ZONE`` of its own)."""

from __future__ import annotations

import difflib
import importlib.util
import zoneinfo
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections
from django.utils import autoreload

from boson_django import conf, validation


@checks.register("boson")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    raw = getattr(django_settings, "BOSON", None)
    if raw is not None and not isinstance(raw, dict):
        return [checks.Error(f"BOSON must be a dict, got {type(raw).__name__} {raw!r:.60}.", id="boson.E004")]
    user = conf.user_settings()
    problems: list[checks.CheckMessage] = []
    for key, value in user.items():
        if key not in conf.DEFAULTS:
            problems.append(_unknown_key(key))
            continue
        problem = _bad_value(key, value)
        if problem:
            problems.append(checks.Error(f"BOSON[{key!r}] {problem}", id="boson.E002"))
    problems.extend(_cross_checks())
    return problems


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
def check_task_modules(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every module holding tasks imports. A worker imports them to learn which tasks may
    run; one that raises (a missing dependency: a cron schedule without cronsim, say)
    would leave every task and schedule declared in it unknown, reported only in the
    worker's log. As a check error it shows in ``check``, ``migrate`` and ``runserver``,
    and ``boson_worker`` does not start."""
    from boson_django import registry

    try:
        listed = conf.user_settings().get("TASK_MODULES")
        if listed is not None and _bad_value("TASK_MODULES", listed):
            return []  # check_settings names the entry that is not a module
        modules = registry.task_modules()
    except Exception:  # noqa: BLE001 -- a bad BOSON value: check_settings names it
        return []
    for module, optional in modules:
        try:
            # check_errors: an autoreloader (runserver's, boson_worker --reload) then
            # watches the file that failed, no module of which is left to watch.
            autoreload.check_errors(registry.import_tasks)(module, optional)
        except Exception as exc:  # noqa: BLE001 -- any error of the user's module, named
            return [_failed_import(module, exc)]
    return [*_schedule_names_taken_twice(), *_schedule_graces_under_a_hand_over()]


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


def _schedule_names_taken_twice() -> list[checks.CheckMessage]:
    """A schedule name declared twice (in code and in ``SCHEDULES``, say) can be seen only
    once every module of tasks is imported; the scheduler would refuse to sync any."""
    from boson_django.schedules.declared import declared

    try:
        declared()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="boson.E007")]
    except Exception:  # noqa: BLE001 -- a bad SCHEDULES entry: check_settings names it
        pass
    return []


def _schedule_graces_under_a_hand_over() -> list[checks.CheckMessage]:
    """The scheduler sees a slot up to a sweep interval late, and a duty hand-over later
    still: a ``grace_ms`` under that counts slots seen in normal running as missed (with
    ``missed="skip"`` and ``grace_ms=0`` a schedule never ran)."""
    from boson_django.schedules.declared import declared

    try:
        found, interval = declared(), conf.get().SWEEP_INTERVAL_MS
    except Exception:  # noqa: BLE001 -- a bad SCHEDULES entry or name: E002/E007 name it
        return []
    if _bad_value("SWEEP_INTERVAL_MS", interval):  # E002 names it
        return []
    hand_over = conf.duty_lease_ms(interval)
    return [
        checks.Warning(
            f"schedule {name!r} has grace_ms={spec.grace_ms}, less than a hand-over of the scheduler's duty "
            f"({hand_over} ms: three SWEEP_INTERVAL_MS): slots it sees in normal running count as missed "
            f"(missed={spec.missed!r}).",
            hint=f"Give it grace_ms={hand_over} or more (the default is one minute).", id="boson.W003",
        )
        for name, (spec, _source) in sorted(found.items()) if spec.grace_ms < hand_over
    ]


def _failed_import(module: str, exc: Exception) -> checks.CheckMessage:
    hint = "A worker cannot run the tasks or schedules it declares until it imports."
    if isinstance(exc, DatabaseError):
        # A query at the module's top level (a set_rate_limit beside the tasks, say) runs
        # when the checks import it -- before `migrate`, on a fresh database, too.
        hint += (
            " It queried the database while being imported, which runs before `migrate` "
            "(the system checks import it): move that query into a data migration, a "
            "deploy step or a function called at run time."
        )
    return checks.Error(
        f"importing {module!r}, a module of tasks, failed: {type(exc).__name__}: {exc}",
        hint=hint,
        id="boson.E005",
    )


def _unknown_key(key: str) -> checks.CheckMessage:
    close = difflib.get_close_matches(str(key).upper(), conf.DEFAULTS, n=1)
    hint = f"Did you mean {close[0]!r}?" if close else f"Known keys: {', '.join(conf.DEFAULTS)}"
    return checks.Error(f"BOSON has an unknown key {key!r}.", hint=hint, id="boson.E001")


def _bad_value(key: str, value: Any) -> str | None:
    kind, minimum = conf.RULES[key]
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join("None" if k is type(None) else k.__name__ for k in kind)
        return f"must be {names}, got {type(value).__name__} {value!r}."
    if minimum is not None and value < minimum:
        return f"must be >= {minimum}, got {value!r}."
    if kind is int:
        top, why = _maximum(key)
        if value > top:
            return f"must be <= {top} ({why}), got {value!r}."
    if key == "DATABASE" and value not in connections.settings:
        return f"names no database in DATABASES: {value!r}."
    if key == "POOLER" and value not in conf.POOLERS:
        return f"must be None, 'session' or 'transaction', got {value!r}."
    if key == "NOTIFY_CHANNEL" and not (value.isidentifier() and value.isascii() and len(value) <= 63):
        return f"must be a plain identifier of at most 63 ASCII characters, got {value!r}."
    if key == "TASK_MODULES":
        return _unimportable(value)
    if key == "TASK_POLICIES":
        from boson_django.task_policies import check_setting as check_task_policies

        return check_task_policies(value)
    if key == "ALLOWED_TASK_MODULES" and value is not None:
        return _not_module_names(value)
    if key == "CONNECTION_OPTIONS":
        return _libpq_options(value)
    if key == "STORE_TIMEOUTS":
        return _store_timeouts(value)
    if key == "SCHEDULES":
        from boson_django.schedules.spec import check_setting

        try:
            return check_setting(value)
        except Exception:  # noqa: BLE001 -- a module of tasks fails to import: boson.E005 names it
            return None
    return None


def _libpq_options(options: dict[Any, Any]) -> str | None:
    """libpq parameters: names, each a whole number >= 0, a string or None (left out)."""
    for name, value in options.items():
        if not isinstance(name, str) or not name.isidentifier():
            return f"must name libpq parameters, got {name!r}."
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, str))
                                  or (isinstance(value, int) and value < 0)):
            return f"must give each libpq parameter a whole number >= 0, a string or None, got {name!r}: {value!r}."
    return None


def _store_timeouts(timeouts: dict[Any, Any]) -> str | None:
    """Milliseconds (0: none) or None (left out), of the timeouts the store sets."""
    for name, value in timeouts.items():
        if name not in conf.DEFAULTS["STORE_TIMEOUTS"]:
            known = ", ".join(conf.DEFAULTS["STORE_TIMEOUTS"])
            return f"names {name!r}, which is not one of the timeouts the store sets ({known})."
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= 2_147_483_647):
            return f"must give each timeout milliseconds (0 to 2147483647, 0: none) or None, got {name!r}: {value!r}."
    return None


def _maximum(key: str) -> tuple[int, str]:
    """The largest value a whole-number setting may take, and why: past it an enqueue, a
    sweep or the worker's start fails with an error that does not name the setting."""
    if key == "SWEEP_INTERVAL_MS":
        intervals = conf.SWEEP_DUTY_INTERVALS
        return validation.MAX_MS // intervals, f"a sweep's duty lease of {intervals} intervals is at most 100 years"
    if key.endswith("_MS"):
        return validation.MAX_MS, "100 years"
    return validation.MAX_COUNT, "the store's 32-bit counts"


def _unimportable(modules: Any) -> str | None:
    """The first TASK_MODULES entry that is not an importable module name, said plainly."""
    for module in modules:
        if not isinstance(module, str):
            return f"must list module names (str), got {module!r}."
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return f"names a module that cannot be imported: {module!r}."
    return None


def _not_module_names(entries: Any) -> str | None:
    """The first ALLOWED_TASK_MODULES entry that is not a dotted module or package name."""
    for entry in entries:
        if not isinstance(entry, str) or not all(part.isidentifier() for part in entry.split(".")):
            return f"must list module or package names such as 'shop.tasks' or 'wagtail', got {entry!r}."
    return None


def _cross_checks() -> list[checks.CheckMessage]:
    user = conf.user_settings()
    if any(_bad_value(k, v) for k, v in user.items() if k in conf.DEFAULTS):
        return []
    effective = conf.get()
    problems: list[checks.CheckMessage] = []
    if effective.RETRY_BASE_MS > effective.RETRY_CAP_MS:
        problems.append(
            checks.Error("BOSON['RETRY_BASE_MS'] is larger than BOSON['RETRY_CAP_MS'].", id="boson.E003")
        )
    return [*problems, *_transaction_pooler_problems(user)]


def _transaction_pooler_problems(user: dict[str, Any]) -> list[checks.CheckMessage]:
    """Behind a pooler in transaction mode nothing may live in the session: prepared
    statements set True are refused (they would be looked for on a server connection
    that never prepared them, and the worker's session settings would leak)."""
    if user.get("POOLER") != conf.TRANSACTION_POOLER or user.get("PREPARED_STATEMENTS") is not True:
        return []
    return [checks.Error(
        "BOSON['PREPARED_STATEMENTS'] = True cannot work with BOSON['POOLER'] = 'transaction': a statement "
        "prepared in one transaction's server session is missing from the next one's, and the worker's session "
        "settings would leak to other clients.",
        hint="Remove BOSON['PREPARED_STATEMENTS'] (it is off behind a transaction pooler), or connect directly.",
        id="boson.E011",
    )]


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


#: What ``OPTIONS`` of a ``BosonBackend`` entry of ``TASKS`` may hold.
BACKEND_OPTIONS = ("database",)


def backend_problems(alias: str, queues: Any, options: Any) -> list[checks.CheckMessage]:
    """``BosonBackend.check()``: its ``TASKS`` entry's ``QUEUES`` are queue names, and its
    ``OPTIONS`` are known, naming a database in ``DATABASES``. Unchecked, a queue name no
    enqueue can use failed every call with an error naming neither the setting nor the
    backend, and an unknown option (a misspelt ``database``) did nothing."""
    entry = f"TASKS[{alias!r}]"
    problems = [checks.Error(f"{entry}['QUEUES'] {why}", id="boson.E008") for why in _bad_queues(queues)]
    options = {} if options is None else options
    if not isinstance(options, dict):
        return [*problems, checks.Error(f"{entry}['OPTIONS'] must be a dict, got {type(options).__name__}.",
                                        id="boson.E009")]
    for key in options:
        if key not in BACKEND_OPTIONS:
            close = difflib.get_close_matches(str(key), BACKEND_OPTIONS, n=1)
            problems.append(checks.Error(
                f"{entry}['OPTIONS'] has an unknown key {key!r}.", id="boson.E009",
                hint=f"Did you mean {close[0]!r}?" if close else f"Known keys: {', '.join(BACKEND_OPTIONS)}.",
            ))
    database = options.get("database")
    if database is not None and (not isinstance(database, str) or database not in connections.settings):
        problems.append(checks.Error(
            f"{entry}['OPTIONS']['database'] is {database!r}, which is not an alias in DATABASES.",
            hint="Name the database that holds the store (default: BOSON['DATABASE']).", id="boson.E009",
        ))
    return problems


def _bad_queues(queues: Any) -> list[str]:
    if queues is None:
        return []
    if isinstance(queues, str) or not isinstance(queues, (list, tuple, set, frozenset)):
        return [f"must be a list of queue names, got {type(queues).__name__} {queues!r:.60}."]
    found = []
    for queue in queues:
        try:
            validation.name(queue, "queue")
        except ValueError as exc:
            found.append(f"has {queue!r:.60}, which is not a queue name ({exc}).")
    return found
