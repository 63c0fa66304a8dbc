"""Reading the job rows raw SQL returns back into envelopes (the columns are the
driver's: :data:`boson_django.drivers.claim.JOB_COLUMNS`)."""

from __future__ import annotations

from typing import Any

from boson_django import database
from boson_django.drivers.claim import JOB_COLUMNS, first_run
from boson_django.services.types import Envelope

__all__ = ["JOB_COLUMNS", "UNREADABLE", "decoded", "envelope_from_job", "envelope_from_row", "first_run"]


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
