"""PostgreSQL fast paths of enqueue: fewer round trips, same decisions.

* :func:`preflight` reads, in one query, what enqueue needs before inserting: the store
  clock, the TaskConfig rows of the batch's tasks, the quarantined fingerprints among the
  batch's and whether an explicit id already exists (SQLite reads them one by one: it is
  in-process, a query costs no round trip there).
* :func:`copy_rows` inserts rows that claim no unique key with ``COPY`` (no per-row SQL
  to build or parse); rows with a unique key keep ``INSERT ... ON CONFLICT``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError

from boson_django import clock
from boson_django.errors import DuplicateJobId

_PREFLIGHT = """
SELECT c.frozen_at, COALESCE(c.offset_ms, 0), clock_timestamp(),
  (SELECT COALESCE(json_agg(row_to_json(t)), '[]'::json) FROM boson_task_config t WHERE t.task = ANY(%s)),
  (SELECT COALESCE(json_agg(json_build_array(q.fingerprint, q.job_id)), '[]'::json)
     FROM boson_quarantined_fingerprint q WHERE q.fingerprint = ANY(%s)),
  (SELECT MIN(j.id) FROM boson_job j WHERE j.id = ANY(%s))
FROM (SELECT 1) AS one LEFT JOIN boson_clock c ON c.id = 1
"""


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


def copy_rows(connection: Any, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> set[str]:
    """COPY the rows into boson_job (in the caller's transaction); returns their ids."""
    raw = connection.connection
    try:
        with connection.wrap_database_errors, raw.cursor() as cursor:
            with cursor.copy(f"COPY boson_job ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row([row[c] for c in columns])
    except IntegrityError as exc:
        raise DuplicateJobId(f"a job id in this batch already exists ({exc})") from exc
    return {row["id"] for row in rows}
