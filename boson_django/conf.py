"""boson_django's settings: one ``BOSON`` dict, each key declared once below.

A key is one field of :class:`Settings`, declared with :func:`setting`: its type (the
annotation), its default, its doc line and its rule. ``docs/settings.md``
(``scripts/gen_docs.py``) and the system checks (:mod:`boson_django.checks`) read the
declarations; :data:`DEFAULTS`, :data:`DOCS` and :data:`RULES` are views of them.
"""

from __future__ import annotations

import copy
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed

#: ``POOLER``'s values; ``TRANSACTION_POOLER`` hands the session to other clients between
#: transactions, so nothing may be kept in it (LISTEN, prepared statements, SET).
POOLERS = (None, "session", "transaction")
TRANSACTION_POOLER = "transaction"

#: A sweep's duty lease lasts this many sweep intervals (and at least a second), so a
#: holder that is late for one renewal keeps its duty.
SWEEP_DUTY_INTERVALS = 3


def duty_lease_ms(interval_ms: int) -> int:
    """A sweep's duty lease for a sweep interval: how long a dead holder keeps its duty."""
    return max(interval_ms * SWEEP_DUTY_INTERVALS, 1_000)


@dataclass(frozen=True)
class Setting:
    """One ``BOSON`` key's declaration: its default, its doc (docs/settings.md), the least
    value a number may take, and ``check``: ``"module:function"``, a function of the value
    (already of the right type) that returns what is wrong with it, or None. The check is
    named, not imported, so that it may live above this module."""

    default: Any
    doc: str
    minimum: int | None = None
    check: str | None = None


def setting(default: Any, doc: str, *, minimum: int | None = None, check: str | None = None) -> Any:
    """A field of :class:`Settings` carrying its :class:`Setting` (a list or dict default
    is copied for each instance)."""
    declared = Setting(default, " ".join(doc.split()), minimum, check)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"setting": declared})
    return field(default=default, metadata={"setting": declared})


_CHECKS = "boson_django.checks.values"


@dataclass(frozen=True)
class Settings:
    CRASH_LIMIT: int = setting(3, 'Lease expiries (worker crashes) after which a job is quarantined.', minimum=1)
    RETRY_BASE_MS: int = setting(1_000, 'Backoff bound of the first retry; doubles per attempt.', minimum=0)
    RETRY_CAP_MS: int = setting(3_600_000, 'Upper bound of any retry backoff.', minimum=0)
    MAX_ATTEMPTS: int = setting(20, 'Handler outcomes a job may spend before a RETRY fails it.', minimum=1)
    LEASE_MS: int = setting(30_000, "How long an admitted job's lease lasts between renewals.", minimum=1)
    RETENTION_MS: int = setting(
        86_400_000,
        'How long finished jobs are kept before eviction (0 deletes at ack).',
        minimum=0,
    )
    POLL_INTERVAL_MS: int = setting(1_000, 'How often an idle worker polls for due work and runs sweeps.', minimum=1)
    MAX_PAYLOAD_BYTES: int = setting(
        16 * 1024 * 1024,
        'Largest JSON-encoded args+kwargs+meta accepted by enqueue.',
        minimum=1,
    )
    MAX_RESULT_BYTES: int = setting(
        16 * 1024 * 1024,
        'Largest JSON-encoded return value, checkpoint or output a handler may store; a larger return value '
        'fails the attempt, a larger checkpoint or output raises in the handler. Nothing of it is written.',
        minimum=1,
    )
    TASK_MODULES: list[str] | tuple[str, ...] = setting(
        [],
        "Modules imported at start-up besides installed apps' `tasks` modules, so that schedules and the "
        'admin know their tasks before a job names them (any module-level task runs without being listed).',
        check=f"{_CHECKS}:importable",
    )
    ALLOWED_TASK_MODULES: list[str] | tuple[str, ...] | None = setting(
        None,
        "None (any module-level task of a boson backend runs, as with Django's own backends), or the modules "
        'and packages whose tasks may run: a worker then imports nothing else a job names (see '
        'docs/guarantees.md).',
        check=f"{_CHECKS}:module_names",
    )
    DATABASE: str = setting(
        'default',
        "Database alias that holds the queue when a call passes no using=. Other than 'default', add "
        "'boson_django.routers.StoreRouter' to DATABASE_ROUTERS so that the admin and migrate use it too "
        '(boson.W001 otherwise).',
        check=f"{_CHECKS}:database_alias",
    )
    SQLITE_BUSY_RETRIES: int = setting(20, "Bounded retries of a store transaction on 'database is locked'.", minimum=0)
    CONCURRENCY: int = setting(10, 'Jobs one worker runs at once (boson_worker --concurrency overrides it).', minimum=1)
    HEARTBEAT_MS: int = setting(
        10_000,
        "How often a worker renews its leases (also at most a third of a job's lease_ms).",
        minimum=1,
    )
    SWEEP_INTERVAL_MS: int = setting(
        1_000,
        'How often workers run promote/reclaim/evict, under duty leases three intervals long (at least 1 s).',
        minimum=1,
    )
    SWEEP_BATCH: int = setting(
        1_000,
        'Most jobs one sweep call touches. On SQLite also at most what its statements can list: 495 jobs '
        'where SQLite binds 999 parameters a statement (before 3.32), 16,379 at its default since.',
        minimum=1,
    )
    SHUTDOWN_GRACE_MS: int = setting(
        30_000,
        'On SIGTERM, how long running jobs may finish before they are released.',
        minimum=0,
    )
    NOTIFY: bool = setting(
        True,
        'PostgreSQL: wake idle workers with LISTEN/NOTIFY (False = poll only, e.g. PgBouncer). Behind POOLER '
        "= 'transaction' workers poll whatever this says (LISTEN needs a session), and enqueues still send "
        'NOTIFY.',
    )
    NOTIFY_CHANNEL: str = setting(
        'boson',
        'PostgreSQL channel used for wake-ups.',
        check=f"{_CHECKS}:channel",
    )
    PREPARED_STATEMENTS: bool = setting(
        True,
        'PostgreSQL with psycopg 3: prepare the hot statements (claim, ack, one-job enqueue) once per '
        'connection instead of planning them on every call (each that is its own transaction runs on libpq '
        "directly: see docs/design.md), and let the worker keep the claim's planner setting for its "
        "connection's session (one round trip per claim instead of three). False behind a pooler in "
        'transaction mode (e.g. PgBouncer): it hands a session to other clients between transactions, so '
        'session settings would leak to them and prepared statements may be lost.',
    )
    POOLER: str | None = setting(
        None,
        "What this process's connections to the store go through: None (PostgreSQL itself, or a pooler in "
        "session mode; 'session' says the same), or 'transaction' (a pooler that hands the session to other "
        "clients between transactions, e.g. PgBouncer's pool_mode = transaction). With 'transaction' a worker"
        ' never LISTENs (it polls) and PREPARED_STATEMENTS is off (True is refused, boson.E011): no client '
        'can tell it is behind one (see docs/workers.md).',
        check=f"{_CHECKS}:pooler",
    )
    RECONNECT_MAX_MS: int = setting(
        30_000,
        'Longest wait between reconnect attempts after a database error (also at most a quarter of the time '
        'left on the shortest lease the worker holds).',
        minimum=1,
    )
    CONNECTION_OPTIONS: dict[str, Any] = setting(
        {"connect_timeout": 5, "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
         "keepalives_count": 3, "tcp_user_timeout": 30_000},
        'PostgreSQL: libpq parameters every connection a worker opens gets (connect timeout in seconds, TCP '
        "keepalives, tcp_user_timeout in ms), merged under the database's OPTIONS, whose own values win. A "
        'key given here replaces its default; None leaves it out (docs/workers.md).',
        check=f"{_CHECKS}:libpq_options",
    )
    STORE_TIMEOUTS: dict[str, Any] = setting(
        {"statement_timeout": 30_000, "lock_timeout": 10_000, "idle_in_transaction_session_timeout": 60_000},
        'PostgreSQL: statement_timeout, lock_timeout and idle_in_transaction_session_timeout (ms, 0 = none) '
        "of the store's own statements on a worker's connections; never of a handler's queries. A key given "
        'here replaces its default; None leaves it out (docs/workers.md).',
        check=f"{_CHECKS}:store_timeouts",
    )
    REPLY_TIMEOUT_MS: int = setting(
        45_000,
        'PostgreSQL: how long a worker waits for the database to answer before it treats the connection as '
        'dead and reconnects; also at most half the time left on its shortest lease (0 = no limit but that).',
        minimum=0,
    )
    LOG_CAPTURE_LEVEL: int = setting(20, "Lowest logging level captured into a job's attempt record.", minimum=0)
    GC_THRESHOLD: int = setting(
        10_000,
        "The garbage collector's first-generation threshold while a worker runs in the process (Python's "
        "default is 700, which turns each claim batch's allocations into collections; see docs/workers.md). 0"
        ' leaves it alone.',
        minimum=0,
    )
    EMBEDDED_WORKER: bool = setting(
        False,
        'Start a worker thread inside each web process, with the first request it serves (see '
        'boson_django.worker.embedded).',
    )
    SCHEDULES: dict[str, Any] = setting(
        {},
        'Periodic jobs declared in settings: name -> {task, cron or every, timezone, missed, args, ...} '
        '(docs/schedules.md).',
        check=f"{_CHECKS}:schedules",
    )
    TASK_POLICIES: dict[str, Any] = setting(
        {},
        'Policy for the tasks under a module path, for tasks whose code is not yours (a third-party '
        "package's): prefix -> {max_attempts, rate_class, weight, retention_ms, lease_ms, timeout_ms, "
        'crash_limit, queue, priority, discard_on}. A prefix covers the module (or task path) it names and '
        'everything under it on a dot; for each field the longest prefix that sets it wins. Above the '
        '@task(...) defaults, below a TaskConfig row (docs/tasks.md#policy-by-module-prefix).',
        check="boson_django.task_policies:check_setting",
    )


def _kinds(annotation: Any) -> tuple[type, ...]:
    """The runtime types an annotation admits: ``list[str] | None`` -> ``(list, NoneType)``."""
    if annotation is None or annotation is type(None):
        return (type(None),)
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        return tuple(kind for arg in typing.get_args(annotation) for kind in _kinds(arg))
    origin = typing.get_origin(annotation) or annotation
    return (origin,) if isinstance(origin, type) else (object,)


def _declared() -> dict[str, tuple[Setting, type | tuple[type, ...]]]:
    hints = typing.get_type_hints(Settings)
    found = {}
    for each in fields(Settings):
        kinds = _kinds(hints[each.name])
        found[each.name] = each.metadata["setting"], kinds[0] if len(kinds) == 1 else kinds
    return found


_DECLARED = _declared()
#: Every key's declaration, in the order of docs/settings.md.
SETTINGS: dict[str, Setting] = {key: declared for key, (declared, _) in _DECLARED.items()}
DEFAULTS: dict[str, Any] = {key: declared.default for key, declared in SETTINGS.items()}
DOCS: dict[str, str] = {key: declared.doc for key, declared in SETTINGS.items()}
#: key -> (type or types, minimum), from the annotation and the declaration.
RULES: dict[str, tuple[type | tuple[type, ...], int | None]] = {
    key: (kinds, declared.minimum) for key, (declared, kinds) in _DECLARED.items()
}


def user_settings() -> dict[str, Any]:
    return dict(getattr(django_settings, "BOSON", None) or {})


_cached: tuple[Any, Settings] | None = None


def get() -> Settings:
    """The effective settings. Cached while ``settings.BOSON`` is the same object (hot paths
    call this per job); ``override_settings`` swaps the object and sends ``setting_changed``,
    which clears the cache, so overrides are seen at once."""
    global _cached
    raw = getattr(django_settings, "BOSON", None)
    cached = _cached
    if cached is not None and cached[0] is raw:
        return cached[1]
    merged = {**DEFAULTS, **{k: v for k, v in user_settings().items() if k in DEFAULTS}}
    if merged["POOLER"] == TRANSACTION_POOLER:
        merged["PREPARED_STATEMENTS"] = False  # even if set: boson.E011 refuses that at start-up
    fresh = Settings(**merged)
    _cached = (raw, fresh)
    return fresh


def clear_cache(**_: Any) -> None:
    global _cached
    _cached = None


setting_changed.connect(clear_cache, dispatch_uid="boson_django.conf.clear_cache")
