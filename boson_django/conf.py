"""boson_django's settings: one ``BOSON`` dict, every key documented here once.

``docs/settings.md`` is generated from :data:`DEFAULTS` and :data:`DOCS`; ``checks.py``
validates the values at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed

DEFAULTS: dict[str, Any] = {
    "CRASH_LIMIT": 3,
    "RETRY_BASE_MS": 1_000,
    "RETRY_CAP_MS": 3_600_000,
    "MAX_ATTEMPTS": 20,
    "LEASE_MS": 30_000,
    "RETENTION_MS": 86_400_000,
    "POLL_INTERVAL_MS": 1_000,
    "MAX_PAYLOAD_BYTES": 16 * 1024 * 1024,
    "MAX_RESULT_BYTES": 16 * 1024 * 1024,
    "TASK_MODULES": [],
    "ALLOWED_TASK_MODULES": None,
    "DATABASE": "default",
    "SQLITE_BUSY_RETRIES": 20,
    "CONCURRENCY": 10,
    "HEARTBEAT_MS": 10_000,
    "SWEEP_INTERVAL_MS": 1_000,
    "SWEEP_BATCH": 1_000,
    "SHUTDOWN_GRACE_MS": 30_000,
    "NOTIFY": True,
    "NOTIFY_CHANNEL": "boson",
    "PREPARED_STATEMENTS": True,
    "POOLER": None,
    "RECONNECT_MAX_MS": 30_000,
    "CONNECTION_OPTIONS": {
        "connect_timeout": 5, "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
        "tcp_user_timeout": 30_000,
    },
    "STORE_TIMEOUTS": {"statement_timeout": 30_000, "lock_timeout": 10_000, "idle_in_transaction_session_timeout": 60_000},
    "REPLY_TIMEOUT_MS": 45_000,
    "LOG_CAPTURE_LEVEL": 20,
    "GC_THRESHOLD": 10_000,
    "EMBEDDED_WORKER": False,
    "SCHEDULES": {},
    "TASK_POLICIES": {},
}

DOCS: dict[str, str] = {
    "CRASH_LIMIT": "Lease expiries (worker crashes) after which a job is quarantined.",
    "RETRY_BASE_MS": "Backoff bound of the first retry; doubles per attempt.",
    "RETRY_CAP_MS": "Upper bound of any retry backoff.",
    "MAX_ATTEMPTS": "Handler outcomes a job may spend before a RETRY fails it.",
    "LEASE_MS": "How long an admitted job's lease lasts between renewals.",
    "RETENTION_MS": "How long finished jobs are kept before eviction (0 deletes at ack).",
    "POLL_INTERVAL_MS": "How often an idle worker polls for due work and runs sweeps.",
    "MAX_PAYLOAD_BYTES": "Largest JSON-encoded args+kwargs+meta accepted by enqueue.",
    "MAX_RESULT_BYTES": (
        "Largest JSON-encoded return value, checkpoint or output a handler may store; a larger return value fails "
        "the attempt, a larger checkpoint or output raises in the handler. Nothing of it is written."
    ),
    "TASK_MODULES": (
        "Modules imported at start-up besides installed apps' `tasks` modules, so that schedules and the admin know "
        "their tasks before a job names them (any module-level task runs without being listed)."
    ),
    "ALLOWED_TASK_MODULES": (
        "None (any module-level task of a boson backend runs, as with Django's own backends), or the modules and "
        "packages whose tasks may run: a worker then imports nothing else a job names (see docs/guarantees.md)."
    ),
    "DATABASE": (
        "Database alias that holds the queue when a call passes no using=. Other than 'default', add "
        "'boson_django.routers.StoreRouter' to DATABASE_ROUTERS so that the admin and migrate use it too "
        "(boson.W001 otherwise)."
    ),
    "SQLITE_BUSY_RETRIES": "Bounded retries of a store transaction on 'database is locked'.",
    "CONCURRENCY": "Jobs one worker runs at once (boson_worker --concurrency overrides it).",
    "HEARTBEAT_MS": "How often a worker renews its leases (also at most a third of a job's lease_ms).",
    "SWEEP_INTERVAL_MS": "How often workers run promote/reclaim/evict, under duty leases three intervals long (at least 1 s).",
    "SWEEP_BATCH": ("Most jobs one sweep call touches. On SQLite also at most what its statements can list: "
                    "495 jobs where SQLite binds 999 parameters a statement (before 3.32), 16,379 at its default since."),
    "SHUTDOWN_GRACE_MS": "On SIGTERM, how long running jobs may finish before they are released.",
    "NOTIFY": (
        "PostgreSQL: wake idle workers with LISTEN/NOTIFY (False = poll only, e.g. PgBouncer). Behind POOLER = "
        "'transaction' workers poll whatever this says (LISTEN needs a session), and enqueues still send NOTIFY."
    ),
    "NOTIFY_CHANNEL": "PostgreSQL channel used for wake-ups.",
    "PREPARED_STATEMENTS": (
        "PostgreSQL with psycopg 3: prepare the hot statements (claim, ack, one-job enqueue) once per connection instead of "
        "planning them on every call (each that is its own transaction runs on libpq directly: see docs/design.md), "
        "and let the worker keep the claim's planner setting for its connection's session "
        "(one round trip per claim instead of three). False behind a pooler in transaction mode (e.g. PgBouncer): it "
        "hands a session to other clients between transactions, so session settings would leak to them and prepared "
        "statements may be lost."
    ),
    "POOLER": (
        "What this process's connections to the store go through: None (PostgreSQL itself, or a pooler in session "
        "mode; 'session' says the same), or 'transaction' (a pooler that hands the session to other clients between "
        "transactions, e.g. PgBouncer's pool_mode = transaction). With 'transaction' a worker never LISTENs (it polls) "
        "and PREPARED_STATEMENTS is off (True is refused, boson.E011): no client can tell it is behind one "
        "(see docs/workers.md)."
    ),
    "RECONNECT_MAX_MS": (
        "Longest wait between reconnect attempts after a database error (also at most a quarter of the time left on "
        "the shortest lease the worker holds)."
    ),
    "CONNECTION_OPTIONS": (
        "PostgreSQL: libpq parameters every connection a worker opens gets (connect timeout in seconds, TCP keepalives, "
        "tcp_user_timeout in ms), merged under the database's OPTIONS, whose own values win. A key given here replaces "
        "its default; None leaves it out (docs/workers.md)."
    ),
    "STORE_TIMEOUTS": (
        "PostgreSQL: statement_timeout, lock_timeout and idle_in_transaction_session_timeout (ms, 0 = none) of the "
        "store's own statements on a worker's connections; never of a handler's queries. A key given here replaces its "
        "default; None leaves it out (docs/workers.md)."
    ),
    "REPLY_TIMEOUT_MS": (
        "PostgreSQL: how long a worker waits for the database to answer before it treats the connection as dead and "
        "reconnects; also at most half the time left on its shortest lease (0 = no limit but that)."
    ),
    "LOG_CAPTURE_LEVEL": "Lowest logging level captured into a job's attempt record.",
    "GC_THRESHOLD": (
        "The garbage collector's first-generation threshold while a worker runs in the process (Python's default is "
        "700, which turns each claim batch's allocations into collections; see docs/workers.md). 0 leaves it alone."
    ),
    "EMBEDDED_WORKER": "Start a worker thread inside each web process, with the first request it serves (see boson_django.worker.embedded).",
    "SCHEDULES": "Periodic jobs declared in settings: name -> {task, cron or every, timezone, missed, args, ...} (docs/schedules.md).",
    "TASK_POLICIES": (
        "Policy for the tasks under a module path, for tasks whose code is not yours (a third-party package's): "
        "prefix -> {max_attempts, rate_class, weight, retention_ms, lease_ms, timeout_ms, crash_limit, queue, priority, "
        "discard_on}. A prefix covers the module (or task path) it names and everything under it on a dot; for each "
        "field the longest prefix that sets it wins. Above the @task(...) defaults, below a TaskConfig row "
        "(docs/tasks.md#policy-by-module-prefix)."
    ),
}

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


#: key -> (type or types, minimum) used by checks.py.
RULES: dict[str, tuple[type | tuple[type, ...], int | None]] = {
    "CRASH_LIMIT": (int, 1),
    "RETRY_BASE_MS": (int, 0),
    "RETRY_CAP_MS": (int, 0),
    "MAX_ATTEMPTS": (int, 1),
    "LEASE_MS": (int, 1),
    "RETENTION_MS": (int, 0),
    "POLL_INTERVAL_MS": (int, 1),
    "MAX_PAYLOAD_BYTES": (int, 1),
    "MAX_RESULT_BYTES": (int, 1),
    "TASK_MODULES": ((list, tuple), None),
    "ALLOWED_TASK_MODULES": ((list, tuple, type(None)), None),
    "DATABASE": (str, None),
    "SQLITE_BUSY_RETRIES": (int, 0),
    "CONCURRENCY": (int, 1),
    "HEARTBEAT_MS": (int, 1),
    "SWEEP_INTERVAL_MS": (int, 1),
    "SWEEP_BATCH": (int, 1),
    "SHUTDOWN_GRACE_MS": (int, 0),
    "NOTIFY": (bool, None),
    "NOTIFY_CHANNEL": (str, None),
    "PREPARED_STATEMENTS": (bool, None),
    "POOLER": ((str, type(None)), None),
    "RECONNECT_MAX_MS": (int, 1),
    "CONNECTION_OPTIONS": (dict, None),
    "STORE_TIMEOUTS": (dict, None),
    "REPLY_TIMEOUT_MS": (int, 0),
    "LOG_CAPTURE_LEVEL": (int, 0),
    "GC_THRESHOLD": (int, 0),
    "EMBEDDED_WORKER": (bool, None),
    "SCHEDULES": (dict, None),
    "TASK_POLICIES": (dict, None),
}


@dataclass(frozen=True)
class Settings:
    CRASH_LIMIT: int
    RETRY_BASE_MS: int
    RETRY_CAP_MS: int
    MAX_ATTEMPTS: int
    LEASE_MS: int
    RETENTION_MS: int
    POLL_INTERVAL_MS: int
    MAX_PAYLOAD_BYTES: int
    MAX_RESULT_BYTES: int
    TASK_MODULES: list[str]
    ALLOWED_TASK_MODULES: list[str] | None
    DATABASE: str
    SQLITE_BUSY_RETRIES: int
    CONCURRENCY: int
    HEARTBEAT_MS: int
    SWEEP_INTERVAL_MS: int
    SWEEP_BATCH: int
    SHUTDOWN_GRACE_MS: int
    NOTIFY: bool
    NOTIFY_CHANNEL: str
    PREPARED_STATEMENTS: bool
    POOLER: str | None
    RECONNECT_MAX_MS: int
    CONNECTION_OPTIONS: dict[str, Any]
    STORE_TIMEOUTS: dict[str, Any]
    REPLY_TIMEOUT_MS: int
    LOG_CAPTURE_LEVEL: int
    GC_THRESHOLD: int
    EMBEDDED_WORKER: bool
    SCHEDULES: dict[str, Any]
    TASK_POLICIES: dict[str, Any]


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
