"""PostgreSQL's enqueue statements: fewer round trips, the same rows.

* :meth:`PostgresEnqueue.preflight` reads in one query what an enqueue needs first.
* :meth:`PostgresEnqueue.copy_rows` bulk-loads keyless rows with binary ``COPY``.
* :meth:`PostgresEnqueue.insert_alone` enqueues one job outside any transaction as one
  autocommit statement, its NOTIFY sent when it commits.
* :meth:`PostgresEnqueue.insert_jobs` creates the queue rows in the same statement.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from django.db import IntegrityError
from django.db.backends.base.base import BaseDatabaseWrapper

from boson_django import database
from boson_django.drivers import guards
from boson_django.drivers.clock import from_row
from boson_django.drivers.enqueue import (
    COLUMNS, CONFLICT, JSON_COLUMNS, EnqueueStatements, Holder, Inserted, Preflight,
)
from boson_django.drivers.postgresql import session
from boson_django.drivers.postgresql.clock import STORE_NOW
from boson_django.errors import DuplicateJobId
from boson_django.states import JobState

#: Batches at least this large insert their keyless rows with COPY.
COPY_FROM = 100

#: The fingerprints are locked FOR KEY SHARE until the enqueue commits: a release from
#: quarantine locks its fingerprint first (FOR UPDATE), so it waits for the jobs parked
#: under it here and releases them too; KEY SHARE, not SHARE, so that a reclaimer
#: registering the fingerprint (FOR NO KEY UPDATE) does not wait for this enqueue.
_PREFLIGHT = """
SELECT c.frozen_at, COALESCE(c.offset_ms, 0), clock_timestamp(),
  (SELECT COALESCE(json_agg(row_to_json(t)), '[]'::json) FROM boson_task_config t WHERE t.task = ANY(%s)),
  (SELECT COALESCE(json_agg(json_build_array(q.fingerprint, q.job_id)), '[]'::json)
     FROM (SELECT fingerprint, job_id FROM boson_quarantined_fingerprint
           WHERE fingerprint = ANY(%s) ORDER BY fingerprint FOR KEY SHARE) AS q),
  (SELECT MIN(j.id) FROM boson_job j WHERE j.id = ANY(%s))
FROM (SELECT 1) AS one LEFT JOIN boson_clock c ON c.id = 1
"""

#: Columns the one-statement enqueue computes instead of taking them as parameters.
_COMPUTED = ("state", "run_at", "enqueued_at")


class PostgresEnqueue(EnqueueStatements):
    copy_from = COPY_FROM

    def preflight(
        self, connection: BaseDatabaseWrapper, tasks: Iterable[str], fingerprints: Iterable[str], ids: Iterable[str]
    ) -> Preflight:
        with connection.cursor() as cursor:
            cursor.execute(_PREFLIGHT, [_storable(tasks), _storable(fingerprints), _storable(ids)])
            frozen_at, offset_ms, server_now, configs, parked, existing = cursor.fetchone()
        return Preflight(
            now=from_row(frozen_at, offset_ms, server_now),
            configs={row["task"]: {k: v for k, v in row.items() if k != "task" and v is not None} for row in configs},
            parked={fp: Holder(fp, job_id) for fp, job_id in parked},
            existing_id=existing,
        )

    def enqueues_alone(self, connection: BaseDatabaseWrapper) -> bool:
        return not connection.in_atomic_block and connection.get_autocommit()  # connects first, as Django's does

    def insert_alone(
        self, connection: BaseDatabaseWrapper, values: dict[str, Any], assumed: dict[str, Any] | None,
        channel: str | None,
    ) -> Inserted | None:
        """Insert the row ``values`` as its own transaction and NOTIFY ``channel`` (None:
        no NOTIFY) when it commits -- only if the fingerprint is not quarantined, the task's
        TaskConfig row is ``assumed`` (its set fields; None: no row) and the unique key is
        free. None when it inserted nothing (nothing written: the caller finds out why)."""
        statement = _alone_sql()
        params = [
            *statement.row(values), values["run_at"], values["fingerprint"], values["task"],
            None if assumed is None else database.to_json(assumed), channel,
        ]
        try:
            rows = session.one_statement(connection, statement.sql, params)
        except IntegrityError as exc:  # the explicit id exists
            raise DuplicateJobId(f"job id {values['id']!r} already exists") from exc
        if not rows:
            return None
        return Inserted(state=rows[0]["state"], run_at=rows[0]["run_at"], enqueued_at=rows[0]["enqueued_at"])

    def copy_rows(self, connection: BaseDatabaseWrapper, rows: Iterable[dict[str, Any]]) -> set[str]:
        """COPY the rows into boson_job in the caller's transaction as ``rows`` yields them;
        returns their ids. An exception from ``rows`` aborts the COPY and propagates."""
        raw = connection.connection
        written: set[str] = set()
        try:
            with connection.wrap_database_errors, raw.cursor() as cursor:
                cursor.execute(f"SELECT {', '.join(COLUMNS)} FROM boson_job LIMIT 0")
                types = [column.type_code for column in cursor.description]
                cursor.adapters.register_dumper(None, _json_text_dumper())
                with cursor.copy(f"COPY boson_job ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types)
                    values = operator.itemgetter(*COLUMNS)
                    for row in rows:
                        copy.write_row(values(row))
                        written.add(row["id"])
        except IntegrityError as exc:
            raise DuplicateJobId(f"a job id in this batch already exists ({exc})") from exc
        return written

    def quarantine_copied(self, connection: BaseDatabaseWrapper, ids: Sequence[str]) -> None:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE boson_job SET state = %s WHERE id = ANY(%s)", [JobState.QUARANTINED.value, list(ids)])

    def insert_jobs(self, connection: BaseDatabaseWrapper, rows: Sequence[dict[str, Any]], queues: set[str]) -> set[str]:
        """The general INSERT, the queue rows created by the same statement (a CTE)."""
        sql, params = self.insert_sql(connection, rows)
        if queues:
            names = sorted(queues)
            sql = (f"WITH new_queues AS (INSERT INTO boson_queue (name, paused) VALUES {', '.join(['(%s, FALSE)'] * len(names))} "
                   f"ON CONFLICT (name) DO NOTHING) {sql}")
            params = [*names, *params]
        return self.run_insert(connection, sql, params)


def _storable(values: Iterable[Any]) -> list[str]:
    """Only values PostgreSQL can compare: the rest fail validation later, naming their field."""
    kept = set()
    for value in values:
        if isinstance(value, str) and "\x00" not in value:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                continue
            kept.add(value)
    return sorted(kept)


@functools.cache
def _json_text_dumper() -> type:
    """Binary jsonb from the JSON text enqueue already made (psycopg's own jsonb dumper
    would encode a str as a JSON string)."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format
    from psycopg.postgres import types

    class JsonText(Dumper):
        format = Format.BINARY
        oid = types["jsonb"].oid

        def dump(self, obj: str) -> bytes:
            return b"\x01" + obj.encode()  # jsonb's binary format: version 1, then the text

    return JsonText


class AloneStatement(NamedTuple):
    """The one-statement enqueue, the columns it takes as parameters and the getter of
    their values from a row."""

    sql: str
    given: tuple[str, ...]
    row: Callable[[dict[str, Any]], tuple[Any, ...]]


@functools.cache
def _alone_sql() -> AloneStatement:
    """Kept flat (sub-selects, no joins): with ``PREPARED_STATEMENTS`` off it is planned on
    every call. Each parameter is used once (server-side binding infers one type per
    parameter): the given columns, then run_at, fingerprint, task, the assumed TaskConfig
    row and the channel."""
    given = tuple(c for c in COLUMNS if c not in _COMPUTED)
    placeholders = ["%s::jsonb" if c in JSON_COLUMNS else "%s" for c in given]
    sql = f"""
WITH ins AS (
  INSERT INTO boson_job ({", ".join(given)}, {", ".join(_COMPUTED)})
  SELECT {", ".join(placeholders)},
         CASE WHEN s.due THEN {guards.state(JobState.AVAILABLE)} ELSE {guards.state(JobState.SCHEDULED)} END,
         CASE WHEN s.due THEN s.now ELSE s.at END,
         s.now
  FROM (SELECT store.now, p.at, p.at IS NULL OR p.at <= store.now AS due
        FROM ({STORE_NOW}) AS store, (SELECT %s::timestamptz AS at) AS p) AS s
  WHERE NOT EXISTS (SELECT 1 FROM boson_quarantined_fingerprint q WHERE q.fingerprint = %s::varchar)
    AND (SELECT jsonb_strip_nulls(to_jsonb(t) - 'task') FROM boson_task_config t WHERE t.task = %s::varchar)
        IS NOT DISTINCT FROM %s::jsonb
  {CONFLICT}
  RETURNING queue, state, run_at, enqueued_at
),
new_queue AS (INSERT INTO boson_queue (name, paused) SELECT queue, FALSE FROM ins ON CONFLICT (name) DO NOTHING)
SELECT state, run_at, enqueued_at, CASE WHEN ch.name IS NOT NULL THEN pg_notify(ch.name, queue) END
FROM ins, (SELECT %s::text AS name) AS ch
"""
    return AloneStatement(sql, given, operator.itemgetter(*given))
