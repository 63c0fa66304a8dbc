"""The values services take and return. Field names are public API (SPEC section 3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple


@dataclass
class Envelope:
    """What to run and under which policy. Only ``task`` is required.

    ``None`` means "not given": the task's TaskConfig row, then the task's code
    defaults, then the ``BOSON`` settings fill it in at enqueue.
    """

    task: str
    id: str | None = None
    queue: str | None = None
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int | None = None
    run_at: datetime | None = None
    unique_key: str | None = None
    fingerprint: str | None = None
    weight: float | None = None
    rate_class: str | None = None
    max_attempts: int | None = None
    retention_ms: int | None = None
    lease_ms: int | None = None
    timeout_ms: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EnqueueResult:
    id: str
    disposition: Literal["created", "duplicate"]


class LeaseRef(NamedTuple):
    job_id: str
    fence: int


class AdmissionUnit(NamedTuple):
    """One admitted job: its lease, its envelope and its attempt counters (immutable)."""

    lease: LeaseRef
    envelope: Envelope
    attempt: int
    crash_attempt: int
    checkpoint: Any
    lease_expires_at: datetime
    #: When the job was enqueued, first started and admitted this time (store clock).
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    attempted_at: datetime | None = None
    #: True when this admission opened the job's first run (no history before it), so
    #: its Django TaskResult can be built from this unit alone.
    first_run: bool = False


@dataclass(frozen=True)
class Reclaimed:
    job_id: str
    fence: int
    state: str
    crash_attempt: int


@dataclass(frozen=True)
class AttemptRecord:
    attempt: int
    fence: int
    outcome: str
    error: str
    logs: list[str]
    at: datetime
    worker_id: str = ""


@dataclass(frozen=True)
class JobOutput:
    job_id: str
    attempt: int
    fence: int
    at: datetime
    data: Any


@dataclass(frozen=True)
class JobProgress:
    job_id: str
    attempt: int
    fence: int
    at: datetime
    current: float
    total: float | None
    message: str


@dataclass(frozen=True)
class JobResult:
    job_id: str
    attempt: int
    fence: int
    at: datetime
    data: Any


@dataclass(frozen=True)
class RunInfo:
    id: int
    job_id: str
    task: str
    queue: str
    attempt: int
    fence: int
    worker_id: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str
    error: str
    recorded: bool


@dataclass(frozen=True)
class JobInfo:
    """A job as list reads show it: no payload, no result."""

    id: str
    task: str
    queue: str
    state: str
    priority: int
    run_at: datetime
    attempt: int
    crash_attempt: int
    fence: int
    enqueued_at: datetime
    finalized_at: datetime | None
    lease_holder: str | None
    lease_expires_at: datetime | None
