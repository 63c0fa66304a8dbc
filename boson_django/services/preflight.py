"""What an enqueue reads before it inserts: the store time, the tasks' TaskConfig rows,
the quarantined fingerprints and whether an explicit id exists."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from boson_django import clock, database
from boson_django.drivers import Driver
from boson_django.drivers.enqueue import Holder, Preflight
from boson_django.models import Job, QuarantinedFingerprint
from boson_django.services import config


def preflight(
    driver: Driver, connection: Any, tasks: Iterable[str], fingerprints: Iterable[str], ids: Iterable[str], using: str
) -> Preflight:
    """What the insert needs first: in one round trip where the driver reads it so,
    otherwise one query each."""
    pre = driver.preflight(connection, tasks, fingerprints, ids)
    if pre is not None:
        return pre
    return Preflight(
        now=clock.now(using), configs=config.task_configs(set(tasks), using),
        parked=_quarantined(fingerprints, using), existing_id=_first_existing(list(ids), using),
    )


def _first_existing(ids: list[str], using: str) -> str | None:
    """One of ``ids`` the store holds already, looked up as many at a time as the engine
    lets one statement list."""
    jobs = Job.objects.using(using)
    for part in database.in_slices(ids, database.most_listed(database.conn(using))):
        found = jobs.filter(id__in=part).values_list("id", flat=True).first()
        if found is not None:
            return str(found)
    return None


def explicit_ids(batch: Sequence[Any]) -> list[str]:
    """The ids callers gave (generated ids are new by construction: no lookup for them)."""
    return [e.id for e in batch if isinstance(getattr(e, "id", None), str)]


def tasks_of(batch: Sequence[Any]) -> set[str]:
    """The task names of envelopes not checked yet (a bad one is refused by the check)."""
    return {e.task for e in batch if isinstance(getattr(e, "task", None), str)}


def _quarantined(fingerprints: Iterable[str], using: str) -> dict[str, Holder]:
    parked = QuarantinedFingerprint.objects.using(using)
    size = database.most_listed(database.conn(using))
    return {q.fingerprint: Holder(q.fingerprint, q.job_id) for part in database.in_slices(list(set(fingerprints)), size)
            for q in parked.filter(fingerprint__in=part)}
