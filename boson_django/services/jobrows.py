"""The job columns raw SQL returns, and reading those rows back into envelopes."""

from __future__ import annotations

from typing import Any

from boson_django import database
from boson_django.services.types import Envelope

#: What an admission reads back of each job it claims: the envelope and the lease, no
#: more (every column returned is converted to text by the server and read back by the
#: worker, once per admitted job).
JOB_COLUMNS = (
    "id, task, queue, priority, args, kwargs, meta, unique_key, fingerprint, weight, "
    "rate_class, max_attempts, retention_ms, lease_ms, timeout_ms, attempt, "
    "crash_attempt, fence, lease_expires_at, checkpoint, run_at"
)


def first_run(job: str) -> str:
    """Whether the job ``job`` names (a table or alias) has no run yet, as a returned column.

    A scalar lookup rather than ``NOT EXISTS``: PostgreSQL may plan an ``EXISTS`` as a
    hashed subplan that reads the whole run table, and it does for the prepared claim's
    generic plan when that plan was made while the run table was empty (a new store, a
    fresh deployment) -- the plan is kept for the life of the connection, so each claim
    then read every run stored since: a burst worker draining 150,000 jobs took 74-85 s
    instead of 14-15 s, slowing as the runs piled up. ``LIMIT 1`` has no hashed form;
    with sequential scans off (``claim_pg._PLANNER``) it is one probe of
    ``boson_run_job_fence`` per claimed job even when the statistics say the run table is
    empty. Used by both admission paths, so they agree on what a first run is.
    """
    return f"(SELECT 1 FROM boson_run r WHERE r.job_id = {job}.id LIMIT 1) IS NULL AS first_run"


class _Unreadable:
    def __repr__(self) -> str:
        return "<unreadable JSON>"


#: A checkpoint Python cannot decode (``None`` means the job has none).
UNREADABLE: Any = _Unreadable()


def decoded(value: Any, unreadable: Any = None) -> Any:
    """A stored JSON column, or ``unreadable`` when Python cannot decode it (nested deeper
    than its recursion limit -- possible only for rows written around the validation of
    enqueue and checkpoint). The worker then acks the job UNDECODABLE instead of failing
    every admission."""
    try:
        return database.from_json(value)
    except (RecursionError, ValueError):
        return unreadable


def envelope_from_row(row: dict[str, Any]) -> Envelope:
    return Envelope(
        id=row["id"], task=row["task"], queue=row["queue"],
        args=decoded(row["args"]), kwargs=decoded(row["kwargs"]),
        priority=row["priority"], run_at=database.dt_value(row["run_at"]),
        unique_key=row["unique_key"], fingerprint=row["fingerprint"], weight=row["weight"],
        rate_class=row["rate_class"], max_attempts=row["max_attempts"],
        retention_ms=row["retention_ms"], lease_ms=row["lease_ms"],
        timeout_ms=row["timeout_ms"], meta=decoded(row["meta"]),
    )


def envelope_from_job(job: Any) -> Envelope:
    """The envelope of a Job model instance."""
    return Envelope(
        id=job.id, task=job.task, queue=job.queue, args=job.args, kwargs=job.kwargs,
        priority=job.priority, run_at=job.run_at, unique_key=job.unique_key,
        fingerprint=job.fingerprint, weight=job.weight, rate_class=job.rate_class,
        max_attempts=job.max_attempts, retention_ms=job.retention_ms, lease_ms=job.lease_ms,
        timeout_ms=job.timeout_ms, meta=job.meta,
    )
