"""System checks: a bad ``BOSON`` value is reported at start-up, naming the key; a
module of tasks that does not import, naming the module; ``USE_TZ = False``; and a store
that would read its times back shifted (SQLite with a ``TIME_ZONE`` of its own).

Importing this package registers every check (``apps.py`` does it at start-up).
"""

from boson_django.checks.backend import BACKEND_OPTIONS, backend_problems
from boson_django.checks.config import check_settings, check_task_modules
from boson_django.checks.store import (
    check_server_side_cursors,
    check_sqlite_time_zone,
    check_sqlite_transaction_mode,
    check_store_routing,
    check_time_zone_support,
)

__all__ = [
    "BACKEND_OPTIONS",
    "backend_problems",
    "check_server_side_cursors",
    "check_settings",
    "check_sqlite_time_zone",
    "check_sqlite_transaction_mode",
    "check_store_routing",
    "check_task_modules",
    "check_time_zone_support",
]
