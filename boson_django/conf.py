"""boson_django's settings: one ``BOSON`` dict, every key documented here once.

``docs/settings.md`` is generated from :data:`DEFAULTS` and :data:`DOCS`; ``checks.py``
validates the values at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings

DEFAULTS: dict[str, Any] = {
    "CRASH_LIMIT": 3,
    "RETRY_BASE_MS": 1_000,
    "RETRY_CAP_MS": 3_600_000,
    "MAX_ATTEMPTS": 20,
    "LEASE_MS": 30_000,
    "RETENTION_MS": 86_400_000,
    "POLL_INTERVAL_MS": 1_000,
    "MAX_PAYLOAD_BYTES": 16 * 1024 * 1024,
    "TASK_MODULES": [],
    "DATABASE": "default",
    "SQLITE_BUSY_RETRIES": 20,
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
    "TASK_MODULES": "Extra modules imported to register tasks (besides installed apps' tasks).",
    "DATABASE": "Database alias that holds the queue when a call passes no using=.",
    "SQLITE_BUSY_RETRIES": "Bounded retries of a store transaction on 'database is locked'.",
}

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
    "TASK_MODULES": ((list, tuple), None),
    "DATABASE": (str, None),
    "SQLITE_BUSY_RETRIES": (int, 0),
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
    TASK_MODULES: list[str]
    DATABASE: str
    SQLITE_BUSY_RETRIES: int


def user_settings() -> dict[str, Any]:
    return dict(getattr(django_settings, "BOSON", None) or {})


def get() -> Settings:
    """The effective settings; read on every call so ``override_settings`` works."""
    merged = {**DEFAULTS, **{k: v for k, v in user_settings().items() if k in DEFAULTS}}
    return Settings(**merged)
