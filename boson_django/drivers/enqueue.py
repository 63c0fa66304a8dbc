"""Inserting job rows as every engine does it.

The decision -- validation, policy, initial state, uniqueness -- is
:mod:`boson_django.services.enqueue`'s; these statements write the rows it made. A row
whose ``unique_key`` a non-terminal job holds is skipped by the partial unique index
(``ON CONFLICT DO NOTHING``); an explicit id that exists raises ``DuplicateJobId``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError
from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.errors import DuplicateJobId
from boson_django.states import UNIQUE_HOLDING, JobState

#: The columns of a new job row, in the order the statements list them.
COLUMNS = (
    "id", "task", "queue", "state", "priority", "args", "kwargs", "meta", "unique_key",
    "fingerprint", "weight", "rate_class", "max_attempts", "retention_ms", "lease_ms",
    "timeout_ms", "crash_limit", "attempt", "crash_attempt", "fence", "charged_weight",
    "last_error", "run_at", "enqueued_at",
)
JSON_COLUMNS = frozenset({"args", "kwargs", "meta"})
#: The states whose job holds its unique key.
HOLDING_SQL = ", ".join(f"'{s.value}'" for s in sorted(UNIQUE_HOLDING))
CONFLICT = f"ON CONFLICT (unique_key) WHERE state IN ({HOLDING_SQL}) AND unique_key IS NOT NULL DO NOTHING"


@dataclass(frozen=True)
class Holder:
    """A quarantined fingerprint and the job that reached the crash limit."""

    fingerprint: str
    job_id: str


@dataclass(frozen=True)
class Preflight:
    """What an enqueue reads before it inserts."""

    now: datetime
    configs: dict[str, dict[str, Any]]  #: task -> the set fields of its TaskConfig row
    parked: dict[str, Holder]  #: quarantined fingerprint -> its holder
    existing_id: str | None  #: one of the explicit ids that exists already


@dataclass(frozen=True)
class Inserted:
    """The row :meth:`EnqueueStatements.insert_alone` wrote."""

    state: str
    run_at: datetime
    enqueued_at: datetime


class EnqueueStatements:
    """The general enqueue statements: INSERT ... ON CONFLICT, in slices the engine binds."""

    #: Batches at least this large go through :meth:`copy_rows` (None: no bulk load).
    copy_from: int | None = None

    if TYPE_CHECKING:  # the driver's other concerns

        def max_list(self, connection: BaseDatabaseWrapper, each: int = 1, besides: int = 0) -> int: ...
        def json_cast(self) -> str: ...

    def preflight(
        self, connection: BaseDatabaseWrapper, tasks: Iterable[str], fingerprints: Iterable[str], ids: Iterable[str]
    ) -> Preflight | None:
        """Read, in one round trip, what an enqueue transaction needs before it inserts; the
        quarantined fingerprints are locked until it commits. None where the engine reads
        them one by one (the caller does)."""
        return None

    def enqueues_alone(self, connection: BaseDatabaseWrapper) -> bool:
        """Whether :meth:`insert_alone` may run now on ``connection`` (no transaction open)."""
        return False

    def insert_alone(
        self, connection: BaseDatabaseWrapper, values: dict[str, Any], assumed: dict[str, Any] | None,
        channel: str | None,
    ) -> Inserted | None:
        """Insert one row as its own transaction, reading the clock, the TaskConfig row and
        the quarantine itself; see :meth:`enqueues_alone`."""
        raise NotImplementedError(f"{type(self).__name__} enqueues in a store transaction")

    def copy_rows(self, connection: BaseDatabaseWrapper, rows: Iterable[dict[str, Any]]) -> set[str]:
        """Bulk-load keyless rows as ``rows`` yields them (see :attr:`copy_from`); their ids."""
        raise NotImplementedError(f"{type(self).__name__} has no bulk load")

    def quarantine_copied(self, connection: BaseDatabaseWrapper, ids: Sequence[str]) -> None:
        """Move rows written in this transaction (by :meth:`copy_rows`) to quarantined."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE boson_job SET state = %s WHERE id IN ({database.placeholders(ids)})",
                [JobState.QUARANTINED.value, *ids],
            )

    def ensure_queues(self, connection: BaseDatabaseWrapper, names: set[str]) -> None:
        """Create the queue rows of ``names`` that do not exist (unpaused); idempotent."""
        with connection.cursor() as cursor:
            for part in database.in_slices(sorted(names), self.max_list(connection, each=2)):
                cursor.execute(
                    f"INSERT INTO boson_queue (name, paused) VALUES {', '.join(['(%s, %s)'] * len(part))} "
                    "ON CONFLICT (name) DO NOTHING",
                    [value for queue in part for value in (queue, False)],
                )

    def insert_jobs(self, connection: BaseDatabaseWrapper, rows: Sequence[dict[str, Any]], queues: set[str]) -> set[str]:
        """Insert ``rows`` (:data:`COLUMNS`, at most ``max_list`` of them) in one statement,
        with the queue rows of ``queues`` first; the ids of the rows created (a row whose key
        is held is skipped). ``DuplicateJobId`` when an id exists."""
        if queues:
            self.ensure_queues(connection, queues)
        sql, params = self.insert_sql(connection, rows)
        return self.run_insert(connection, sql, params)

    def insert_sql(self, connection: BaseDatabaseWrapper, rows: Sequence[dict[str, Any]]) -> tuple[str, list[Any]]:
        """The INSERT ... ON CONFLICT ... RETURNING id of ``rows``, and its parameters."""
        cast = self.json_cast()
        one = "(" + ", ".join(f"%s{cast}" if c in JSON_COLUMNS else "%s" for c in COLUMNS) + ")"
        params: list[Any] = []
        for values in rows:
            for column in COLUMNS:
                value = values[column]
                params.append(database.dt_param(connection, value) if isinstance(value, datetime) else value)
        sql = (
            f"INSERT INTO boson_job ({', '.join(COLUMNS)}) VALUES {', '.join([one] * len(rows))} "
            f"{CONFLICT} RETURNING id"
        )
        return sql, params

    @staticmethod
    def run_insert(connection: BaseDatabaseWrapper, sql: str, params: list[Any]) -> set[str]:
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return {r[0] for r in cursor.fetchall()}
        except IntegrityError as exc:
            raise DuplicateJobId(f"a job id in this batch already exists ({exc})") from exc

    def key_holders(self, connection: BaseDatabaseWrapper, keys: set[Any]) -> dict[str, str]:
        """The id of the job holding each of ``keys`` (None ignored) that one holds."""
        keys.discard(None)
        if not keys:
            return {}
        holders: dict[str, str] = {}
        with connection.cursor() as cursor:
            for part in database.in_slices(sorted(keys), self.max_list(connection)):
                cursor.execute(
                    f"SELECT unique_key, id FROM boson_job WHERE unique_key IN ({database.placeholders(part)}) "
                    f"AND state IN ({HOLDING_SQL})",
                    part,
                )
                holders.update(cursor.fetchall())
        return holders
