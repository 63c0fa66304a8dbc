"""Runs and attempt records: open a run at admission, close it at the transition."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from boson_django.models import Run
from boson_django.validation import storable_text
from boson_django import database, drivers

MAX_LOG_LINES = 200
MAX_LOG_CHARS = 64_000
#: Rows per insert statement at most (SQLite caps the parameters of one statement: fewer
#: where its limit says so).
_CHUNK = 500


def open_runs(jobs: Iterable[Mapping[str, Any]], worker_id: str, now: datetime, using: str) -> None:
    """One insert for the whole admitted batch (raw SQL: the ORM's bulk_create cost more
    than the statement on the claim path)."""
    rows = list(jobs)
    if not rows:
        return
    connection = database.conn(using)
    stamp = database.dt_param(connection, now)
    one = f"(%s, %s, %s, %s, %s, %s, %s, NULL, '', '', %s{drivers.for_connection(connection).json_cast()}, FALSE)"
    params: list[Any] = []
    for job in rows:
        params += [job["id"], job["task"], job["queue"], job["attempt"] + 1, job["fence"], worker_id, stamp, "[]"]
    size = min(_CHUNK, database.most_listed(connection, each=8))  # 125 runs where SQLite binds 999 parameters
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            chunk = params[start * 8 : (start + size) * 8]
            cursor.execute(
                "INSERT INTO boson_run (job_id, task, queue, attempt, fence, worker_id, started_at, finished_at, "
                f"outcome, error, logs, recorded) VALUES {', '.join([one] * (len(chunk) // 8))}",
                chunk,
            )


def dropped_marker(count: int) -> str:
    """The line that stands for ``count`` log lines left out before the ones kept."""
    return f"[{count} earlier log lines dropped]"


def split_dropped(lines: list[str]) -> tuple[int, list[str]]:
    """How many lines a leading :func:`dropped_marker` says were left out, and the rest."""
    if lines and (found := _MARKER.fullmatch(lines[0])):
        return int(found.group(1)), lines[1:]
    return 0, lines


_MARKER = re.compile(r"\[(\d+) earlier log lines dropped\]")


def bounded_logs(logs: Sequence[Any]) -> list[str]:
    """Keep the last lines within the size bounds, saying how many were dropped in all:
    those this leaves out, and those a leading marker says were left out before (a
    worker's capture keeps only the newest lines of a chatty handler)."""
    earlier, lines = split_dropped([storable_text(str(line)) for line in logs])
    kept: list[str] = []
    total = 0
    for line in reversed(lines[-MAX_LOG_LINES:]):
        total += len(line)
        if total > MAX_LOG_CHARS:
            break
        kept.append(line)
    kept.reverse()
    dropped = earlier + len(lines) - len(kept)
    return ([dropped_marker(dropped)] if dropped else []) + kept


def close_run(
    job_id: str, fence: int, *, outcome: str, now: datetime, using: str,
    error: str = "", logs: Sequence[Any] = (), recorded: bool = True,
) -> int:
    """Close the open run of this claim; returns how many were closed (0 or 1)."""
    return (
        Run.objects.using(using)
        .filter(job_id=job_id, fence=fence, finished_at__isnull=True)
        .update(finished_at=now, outcome=outcome, error=error or "", logs=bounded_logs(logs), recorded=recorded)
    )


def close_runs(
    closing: Sequence[tuple[str, int]], *, outcome: str, error: str, now: datetime, using: str
) -> None:
    """Close many runs with one outcome (sweeps): one statement."""
    if not closing:
        return
    connection = database.conn(using)
    found, keyed = database.by_key_and_fence("job_id", closing)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE boson_run SET finished_at = %s, outcome = %s, error = %s, recorded = TRUE "
            f"WHERE {found} AND {database.STILL_OPEN}",
            [database.dt_param(connection, now), outcome, error, *keyed],
        )


def record(
    job: Mapping[str, Any] | Any, *, outcome: str, now: datetime, using: str, error: str = ""
) -> None:
    """An attempt record for an event that ran no handler (cancel, retry, quarantine, release)."""
    record_many([job], outcome=outcome, now=now, using=using, error=error)


def record_many(
    jobs: Sequence[Mapping[str, Any] | Any], *, outcome: str, now: datetime, using: str, error: str = ""
) -> None:
    """:func:`record` for many jobs at once (an operator's bulk action): one insert."""
    Run.objects.using(using).bulk_create([_record_of(job, outcome, now, error) for job in jobs])


def _record_of(job: Mapping[str, Any] | Any, outcome: str, now: datetime, error: str) -> Run:
    get = job.get if isinstance(job, Mapping) else lambda k: getattr(job, k)
    return Run(
        job_id=get("id"), task=get("task"), queue=get("queue"), attempt=get("attempt"),
        fence=get("fence"), worker_id="", started_at=now, finished_at=now, outcome=outcome,
        error=error, logs=[], recorded=True,
    )
