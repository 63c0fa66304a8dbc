"""What the many-id controls share: their report (:class:`Controlled`), running a control
a chunk per transaction, and writing the jobs a control decided."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from boson_django import database, drivers, validation
from boson_django.errors import ControlInterrupted, StoreError, UnknownJob
from boson_django.models import Job
from boson_django.states import Event


@dataclass
class Controlled:
    """What a job control did with the ids it was given; each id lands in one list."""

    done: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # the job's state does not allow it (any more)
    key_held: list[str] = field(default_factory=list)  # retry: a newer live job holds its unique_key
    unknown: list[str] = field(default_factory=list)  # no such job (never was, or deleted)
    also: int = 0  # jobs changed besides the ids given: a release's parked copies

    def add(self, other: Controlled) -> None:
        self.done += other.done
        self.refused += other.refused
        self.key_held += other.key_held
        self.unknown += other.unknown
        self.also += other.also


Chunk = Callable[..., Controlled]


def in_chunks(control: Chunk, job_ids: Iterable[str], using: str | None, chunk: int) -> Controlled:
    """Run ``control`` (one transaction) over the distinct, checked ids, ``chunk`` at a time."""
    ids = checked(job_ids)
    size = min(chunk, database.most_listed(database.conn(using), each=2, besides=BOUND_BESIDES_JOBS))
    return each_chunk([(chunk, chunk) for chunk in database.in_slices(ids, size)], control, using, Controlled())


#: Parameters a control's statements bind besides two per job (the runs a cancel closes
#: are matched by job and fence).
BOUND_BESIDES_JOBS = 8


def checked(job_ids: Iterable[str]) -> list[str]:
    """The distinct ids, each checked (a bad one names the field before anything is written)."""
    ids = list(dict.fromkeys(job_ids))
    for job_id in ids:
        validation.name(job_id, "id", max_len=64)
    return ids


def each_chunk(chunks: list[tuple[Any, list[str]]], control: Chunk, using: str | None, total: Controlled) -> Controlled:
    """Apply ``control`` to each chunk (its argument, and the ids it holds) in turn.

    A database error stops the run with :class:`ControlInterrupted`, which carries what
    the committed chunks did (raised as it was, it would hide that they committed)."""
    for position, (argument, _) in enumerate(chunks):
        try:
            total.add(control(argument, using=using))
        except DatabaseError as exc:
            not_reached = [job_id for _, ids in chunks[position:] for job_id in ids]
            raise ControlInterrupted(total, not_reached, exc) from exc
    return total


def one(control: Callable[..., Controlled], job_id: str, using: str | None) -> bool:
    """A many-id control applied to one id, answering as the public API's one-id function:
    ``UnknownJob`` for an id the store does not hold, the database's own error as is."""
    try:
        result = control([job_id], using=using)
    except ControlInterrupted as exc:
        raise exc.__cause__ from None  # type: ignore[misc]
    if result.unknown:
        raise UnknownJob(f"no job {job_id!r}")
    return bool(result.done)


def write(jobs: list[Job], fields: Sequence[str], event: Event, using: str) -> None:
    """Save ``fields`` of locked jobs ``event`` may move: one statement per distinct set
    of values (a chunk's jobs mostly share them)."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for job in jobs:
        groups.setdefault(tuple(getattr(job, name) for name in fields), []).append(job.id)
    driver, connection = drivers.for_alias(using), database.conn(using)
    for values, ids in groups.items():
        if driver.write_jobs(connection, event, dict(zip(fields, values)), ids) != len(ids):
            raise StoreError(f"{event.value}: locked job rows changed under their lock")
