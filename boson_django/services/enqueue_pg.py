"""PostgreSQL fast paths of enqueue: fewer round trips, same decisions.

* :func:`preflight` reads, in one query, what enqueue needs before inserting: the store
  clock, the TaskConfig rows of the batch's tasks, the quarantined fingerprints among the
  batch's and whether an explicit id already exists (SQLite reads them one by one: it is
  in-process, a query costs no round trip there).
* :func:`copy_rows` inserts rows that claim no unique key with ``COPY`` (no per-row SQL
  to build or parse); rows with a unique key keep ``INSERT ... ON CONFLICT``.
* :func:`insert_alone` enqueues one job outside any transaction as one autocommit
  statement: what the preflight reads is read inside the INSERT, and a NOTIFY in it is
  sent when it commits. One round trip instead of four (BEGIN, preflight, INSERT,
  COMMIT), and with ``PREPARED_STATEMENTS`` no planning per call.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import IntegrityError

from boson_django import clock
from boson_django.errors import DuplicateJobId
from boson_django import database
from boson_django.drivers.postgresql import session

#: What an enqueue transaction reads before it inserts: the store clock, the TaskConfig
#: rows of its tasks, its quarantined fingerprints and whether an explicit id exists. The
#: fingerprints are locked FOR KEY SHARE until it commits: a release from quarantine locks
#: its fingerprint first, so it waits for the jobs parked under it here and releases them
#: too (:func:`boson_django.services.control.release_quarantined`). KEY SHARE, not SHARE:
#: a reclaimer registering the fingerprint locks it FOR NO KEY UPDATE, which SHARE would
#: make wait for this enqueue while this enqueue's unique key waited for the reclaimer's
#: job (a deadlock); KEY SHARE still blocks the release's FOR UPDATE and DELETE.
_PREFLIGHT = """
SELECT c.frozen_at, COALESCE(c.offset_ms, 0), clock_timestamp(),
  (SELECT COALESCE(json_agg(row_to_json(t)), '[]'::json) FROM boson_task_config t WHERE t.task = ANY(%s)),
  (SELECT COALESCE(json_agg(json_build_array(q.fingerprint, q.job_id)), '[]'::json)
     FROM (SELECT fingerprint, job_id FROM boson_quarantined_fingerprint
           WHERE fingerprint = ANY(%s) ORDER BY fingerprint FOR KEY SHARE) AS q),
  (SELECT MIN(j.id) FROM boson_job j WHERE j.id = ANY(%s))
FROM (SELECT 1) AS one LEFT JOIN boson_clock c ON c.id = 1
"""


#: Columns the statement computes instead of taking them as parameters.
_COMPUTED = ("state", "run_at", "enqueued_at")


@dataclass(frozen=True)
class Holder:
    """A quarantined fingerprint and the job that reached the crash limit."""

    fingerprint: str
    job_id: str


@dataclass(frozen=True)
class Preflight:
    now: datetime
    configs: dict[str, dict[str, Any]]
    parked: dict[str, Holder]
    existing_id: str | None


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


def preflight(connection: Any, tasks: Iterable[str], fingerprints: Iterable[str], ids: Iterable[str]) -> Preflight:
    with connection.cursor() as cursor:
        cursor.execute(_PREFLIGHT, [_storable(tasks), _storable(fingerprints), _storable(ids)])
        frozen_at, offset_ms, server_now, configs, parked, existing = cursor.fetchone()
    return Preflight(
        now=clock.from_row(frozen_at, offset_ms, server_now),
        configs={row["task"]: {k: v for k, v in row.items() if k != "task" and v is not None} for row in configs},
        parked={fp: Holder(fp, job_id) for fp, job_id in parked},
        existing_id=existing,
    )


def copy_rows(connection: Any, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> set[str]:
    """COPY the rows into boson_job (in the caller's transaction) as ``rows`` yields
    them (the server inserts while they are made); returns their ids. An exception from
    ``rows`` aborts the COPY and propagates.

    Binary COPY, with the column types read from the table: psycopg formats a binary row
    in about half the time of a text one, and the server parses it faster too.
    """
    raw = connection.connection
    written: set[str] = set()
    try:
        with connection.wrap_database_errors, raw.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(columns)} FROM boson_job LIMIT 0")
            types = [column.type_code for column in cursor.description]
            cursor.adapters.register_dumper(None, _json_text_dumper())
            with cursor.copy(f"COPY boson_job ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(types)
                values = operator.itemgetter(*columns)
                for row in rows:
                    copy.write_row(values(row))
                    written.add(row["id"])
    except IntegrityError as exc:
        raise DuplicateJobId(f"a job id in this batch already exists ({exc})") from exc
    return written


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


@dataclass(frozen=True)
class Inserted:
    """The row :func:`insert_alone` wrote."""

    state: str
    run_at: datetime
    enqueued_at: datetime


class AloneStatement(NamedTuple):
    """:func:`alone_sql`'s statement, the columns it takes as parameters and the getter
    of their values from a row (one call, not a loop over 21 columns)."""

    sql: str
    given: tuple[str, ...]
    row: Callable[[dict[str, Any]], tuple[Any, ...]]


@functools.cache
def alone_sql(columns: tuple[str, ...], json_columns: frozenset[str], conflict: str) -> AloneStatement:
    """The statement of :func:`insert_alone` for enqueue's columns and conflict clause,
    and the columns it takes as parameters. Kept flat (sub-selects, no joins): with
    ``PREPARED_STATEMENTS`` off it is planned on every call. Each parameter is used once
    (server-side binding infers one type per parameter): those columns, then run_at,
    fingerprint, task, the assumed TaskConfig row and the channel."""
    given = tuple(c for c in columns if c not in _COMPUTED)
    placeholders = ["%s::jsonb" if c in json_columns else "%s" for c in given]
    sql = f"""
WITH ins AS (
  INSERT INTO boson_job ({", ".join(given)}, {", ".join(_COMPUTED)})
  SELECT {", ".join(placeholders)},
         CASE WHEN s.due THEN 'available' ELSE 'scheduled' END,
         CASE WHEN s.due THEN s.now ELSE s.at END,
         s.now
  FROM (SELECT store.now, p.at, p.at IS NULL OR p.at <= store.now AS due
        FROM ({clock.PG_NOW}) AS store, (SELECT %s::timestamptz AS at) AS p) AS s
  WHERE NOT EXISTS (SELECT 1 FROM boson_quarantined_fingerprint q WHERE q.fingerprint = %s::varchar)
    AND (SELECT jsonb_strip_nulls(to_jsonb(t) - 'task') FROM boson_task_config t WHERE t.task = %s::varchar)
        IS NOT DISTINCT FROM %s::jsonb
  {conflict}
  RETURNING queue, state, run_at, enqueued_at
),
lane AS (INSERT INTO boson_queue (name, paused) SELECT queue, FALSE FROM ins ON CONFLICT (name) DO NOTHING)
SELECT state, run_at, enqueued_at, CASE WHEN ch.name IS NOT NULL THEN pg_notify(ch.name, queue) END
FROM ins, (SELECT %s::text AS name) AS ch
"""
    return AloneStatement(sql, given, operator.itemgetter(*given))


def insert_alone(
    connection: Any, statement: AloneStatement, values: dict[str, Any],
    assumed: dict[str, Any] | None, channel: str | None,
) -> Inserted | None:
    """Run :func:`alone_sql`'s ``statement`` for the row ``values`` as its own
    transaction (the caller checked that none is open), so it commits, and sends its
    NOTIFY to ``channel``, by itself.

    It inserts the row only if the fingerprint is not quarantined, the task's TaskConfig
    row is ``assumed`` (its set fields; None: no row) and the unique key is free; None
    when it did not (nothing written: the caller finds out why).
    """
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
