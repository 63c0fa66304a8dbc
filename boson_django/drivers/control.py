"""Statements of the operator controls: cancel, retry, release from quarantine.

The services lock the jobs and decide each one's new columns; :meth:`write_jobs` writes
them, guarded by the states the control's event accepts (:mod:`.guards`), so a job
that is no longer in one of them is not written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers import guards
from boson_django.states import Event


class ControlStatements:
    """The control statements every engine shares."""

    def write_jobs(
        self, connection: BaseDatabaseWrapper, event: Event, values: Mapping[str, Any], ids: Sequence[str]
    ) -> int:
        """Set ``values`` (column -> value) on the jobs ``ids`` that ``event`` may move, one
        statement; how many were written. A unique index refusing a value raises the
        database's ``IntegrityError`` and writes nothing."""
        if not ids:
            return 0
        columns = list(values)
        params = [database.dt_param(connection, v) if isinstance(v, datetime) else v for v in values.values()]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE boson_job SET {', '.join(f'{c} = %s' for c in columns)} "
                f"WHERE id IN ({database.placeholders(ids)}) AND {guards.allowed_by_key(event)}",
                [*params, *ids],
            )
            return cursor.rowcount
