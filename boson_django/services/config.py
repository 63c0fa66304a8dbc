"""Per-task policy: the TaskConfig row overrides ``BOSON["TASK_POLICIES"]``, which
overrides the ``@task`` code defaults, which override the global ``BOSON`` settings."""

from __future__ import annotations

import warnings
from typing import Any

from boson_django import conf, discards, registry, task_policies, validation
from boson_django.policies import UNIQUENESS
from boson_django.errors import UnregisteredTaskWarning
from boson_django.models import TaskConfig
from boson_django.services import wakeups
from boson_django.database import store_transaction

POLICY_FIELDS = (
    "max_attempts", "max_active", "rate_class", "weight", "retention_ms",
    "lease_ms", "timeout_ms", "crash_limit", "queue", "priority", "uniqueness", "discard_on",
)


def task_configs(tasks: set[str], using: str) -> dict[str, dict[str, Any]]:
    """The set fields of each task's TaskConfig row (one query for the batch)."""
    if not tasks:
        return {}
    rows = TaskConfig.objects.using(using).filter(task__in=tasks).values()
    return {row["task"]: {k: v for k, v in row.items() if k != "task" and v is not None} for row in rows}


def resolve(task: str, given: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """Fill unset envelope fields: explicit > TaskConfig > TASK_POLICIES (longest prefix)
    > @task defaults > settings."""
    settings = conf.get()
    base = {
        "queue": "default",
        "priority": 0,
        "weight": 1.0,
        "rate_class": None,
        "max_attempts": settings.MAX_ATTEMPTS,
        "retention_ms": settings.RETENTION_MS,
        "lease_ms": settings.LEASE_MS,
        "timeout_ms": None,
        "crash_limit": settings.CRASH_LIMIT,
        "unique_key": None,
    }
    code = registry.defaults_for(task)
    merged = {**base, **task_policies.layered(task, code, row)}
    merged.update({k: v for k, v in given.items() if v is not None})
    return merged


def _validated(fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(POLICY_FIELDS)
    if unknown:
        raise validation.InvalidEnvelope(sorted(unknown)[0], f"is not a task policy field; use one of {POLICY_FIELDS}")
    checks = {
        "max_attempts": lambda v: validation.optional_whole(v, "max_attempts", minimum=1),
        "max_active": lambda v: validation.optional_whole(v, "max_active", minimum=1),
        "crash_limit": lambda v: validation.optional_whole(v, "crash_limit", minimum=1),
        "retention_ms": lambda v: validation.optional_whole(v, "retention_ms"),
        "lease_ms": lambda v: validation.optional_whole(v, "lease_ms", minimum=1),
        "timeout_ms": lambda v: validation.optional_whole(v, "timeout_ms", minimum=1),
        "weight": lambda v: None if v is None else validation.amount(v, "weight"),
        "rate_class": lambda v: validation.optional_name(v, "rate_class"),
        "queue": lambda v: validation.optional_name(v, "queue"),
        "priority": lambda v: None if v is None else validation.priority(v),
        "uniqueness": lambda v: None if v is None else validation.one_of(v, UNIQUENESS, "uniqueness"),
        "discard_on": discards.stored,
    }
    return {key: checks[key](value) for key, value in fields.items()}


def set_task_config(task: str, *, using: str | None = None, warn_unregistered: bool = True, **fields: Any) -> TaskConfig:
    """Write (create or update) the TaskConfig row; ``None`` clears a field back to code defaults.

    Idempotent. Applies to jobs enqueued afterwards: a job's policy is fixed at enqueue;
    ``max_active``, read at admission, applies to waiting jobs too, and idle workers are
    woken at commit to admit what a raised cap lets through; ``discard_on`` (exception
    classes or their dotted paths, stored as paths), read when a handler raises, applies
    to the next failure of any job of the task.
    A name no registered task has is written all the same, with an
    ``UnregisteredTaskWarning`` naming the closest registered task. The warning comes
    after the write has committed (or joined your transaction), so a warning filter that
    turns it into an error (``-W error``) does not undo the write. A caller that tells
    its user itself (the admin shows :func:`unregistered_hint`) passes
    ``warn_unregistered=False``: inside that caller's transaction, a warning raised as
    an error would undo the write after all.
    """
    row = _write_task_config(task, using=using, **fields)
    if warn_unregistered:
        warn_if_unregistered(task)
    return row


@store_transaction
def _write_task_config(task: str, *, using: str | None = None, **fields: Any) -> TaskConfig:
    validation.name(task, "task", max_len=255)
    values = _validated(fields)
    row, _ = TaskConfig.objects.using(using).get_or_create(task=task)
    for key, value in values.items():
        setattr(row, key, value)
    row.save(using=using)
    wakeups.notify_at_commit([wakeups.ANY_QUEUE], using)  # a cap raised frees waiting jobs now
    return row


@store_transaction
def delete_task_config(task: str, *, using: str | None = None) -> bool:
    """Delete the task's TaskConfig row, so it falls back to its ``@task`` code defaults
    (then ``BOSON`` settings). ``False`` when it had none. Idempotent.

    Nothing keeps the row in memory: an enqueue reads the row (or, on PostgreSQL's
    one-statement path, checks it is still absent) and an admission locks the rows that
    cap ``max_active``, so the next of each sees the deletion. Jobs already enqueued keep
    the policy they were enqueued with; ``max_active``, read at admission, stops capping
    at once. An admission holding the row's lock finishes first.
    """
    validation.name(task, "task", max_len=255)
    deleted, _ = TaskConfig.objects.using(using).filter(task=task).delete()
    if deleted:
        wakeups.notify_at_commit([wakeups.ANY_QUEUE], using)  # its cap is gone
    return deleted > 0


def warn_if_unregistered(task: str) -> None:
    """Warn (``UnregisteredTaskWarning``) when no registered task has this name: the row is
    kept, since a config may come before the deploy of its task, but a typo would
    otherwise configure nothing without a word. The warning points at the caller."""
    hint = unregistered_hint(task)
    if hint:
        warnings.warn(hint, UnregisteredTaskWarning, stacklevel=3)  # this function, set_task_config, the caller


def unregistered_hint(task: str) -> str | None:
    """What to tell whoever configured ``task`` when no registered task has that name
    (the closest one that does, if any); ``None`` for a registered task."""
    if registry.is_registered(task):
        return None
    close = registry.closest(task)
    return (f"No task named {task!r} is registered: its config applies once one is deployed, "
            f"and a misspelt name applies to nothing." + (f" Did you mean {close!r}?" if close else ""))
