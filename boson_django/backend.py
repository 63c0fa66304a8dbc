"""The Django Tasks backend: ``TASKS = {"default": {"BACKEND": "boson_django.backend.BosonBackend"}}``.

One code path for ``django.tasks`` (Django 6) and the ``django_tasks`` backport
(Django 5.2); see :mod:`boson_django.compat`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from boson_django import _installed, checks, discards, registry, services, validation  # noqa: F401 -- _installed first
from boson_django.compat import (
    BaseTaskBackend,
    Task,
    TaskResultDoesNotExist,
    task_enqueued,
)
from boson_django.errors import InvalidEnvelope
from boson_django.schedules.spec import Schedule, as_schedules
from boson_django.services import _db
from boson_django.services.enqueue import enqueue_one
from boson_django.taskresults import build_result, enqueued_result

#: Boson's per-task policy, accepted by ``@task(...)`` and ``.using(...)``.
POLICY_OPTIONS = (
    "max_attempts", "unique_key", "rate_class", "weight", "retention_ms", "lease_ms",
    "timeout_ms", "crash_limit", "discard_on",
)
#: Policy a job takes from its task only (``@task``, TaskConfig, settings): no envelope
#: carries it, so ``.using(...)`` refuses it rather than drop it.
TASK_ONLY_OPTIONS = ("crash_limit", "discard_on")


@dataclass(frozen=True, slots=True, kw_only=True)
class BosonTask(Task):  # type: ignore[misc,valid-type,unused-ignore]
    """A Django ``Task`` that also carries boson's policy as code defaults.

    A ``TaskConfig`` row edited in the admin overrides these; a value given per call
    with ``.using(...)`` overrides both.
    """

    max_attempts: int | None = None
    unique_key: str | Callable[..., str] | None = None
    rate_class: str | None = None
    weight: float | None = None
    retention_ms: int | None = None
    lease_ms: int | None = None
    timeout_ms: int | None = None
    crash_limit: int | None = None
    #: Exception classes (or their dotted paths) whose instances, raised by the handler,
    #: fail the job at once instead of retrying it (:mod:`boson_django.discards`).
    discard_on: tuple[type[BaseException] | str, ...] | None = None
    #: Periodic runs: a cron string, a ``boson_django.schedules.Schedule`` or a list of them.
    schedule: str | Schedule | list[str | Schedule] | tuple[Schedule, ...] | None = None
    #: The envelope fields this copy was given with ``.using(...)``: they win over the
    #: TaskConfig row even when equal to the task's own ``@task(...)`` value.
    per_call: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __post_init__(self) -> None:
        Task.__post_init__(self)
        object.__setattr__(self, "schedule", as_schedules(self.schedule))
        if self.discard_on is not None:  # a tuple, checked (its paths are imported when first needed)
            object.__setattr__(self, "discard_on", _discard_on(self.discard_on))
        registry.register(self)

    def using(self, **changes: Any) -> BosonTask:  # type: ignore[override]
        """Django's ``using`` plus boson's policy options (``.using(max_attempts=3)``);
        ``crash_limit`` and ``discard_on`` are the task's own (``@task``, its TaskConfig
        row or ``TASK_POLICIES``), never per call."""
        for name in TASK_ONLY_OPTIONS:
            if name in changes:
                raise InvalidEnvelope(name, "is set per task (@task(...) or its TaskConfig row), not per call with .using()")
        policy = {k: changes.pop(k) for k in list(changes) if k in POLICY_OPTIONS}
        given = {_ENVELOPE_NAMES.get(k, k) for k, v in {**changes, **policy}.items() if v is not None}
        return replace(Task.using(self, **changes), **policy, per_call=self.per_call | given)

    def boson_policy(self) -> dict[str, Any]:
        """The code defaults ``registry.defaults_for`` reports for this task."""
        found = {name: getattr(self, name) for name in POLICY_OPTIONS if name != "unique_key"}
        if isinstance(self.unique_key, str):
            found["unique_key"] = self.unique_key
        found.update(queue=self.queue_name, priority=self.priority)
        return found


def _discard_on(value: Any) -> tuple[Any, ...]:
    """``@task(discard_on=...)`` as a tuple of classes and paths; a class that is not an
    exception, or anything else, raises ``InvalidEnvelope`` naming ``discard_on``."""
    listed = discards.entries(value)
    discards.classes(tuple(entry for entry in listed if isinstance(entry, type)))
    return listed


class BosonBackend(BaseTaskBackend):  # type: ignore[misc,valid-type,unused-ignore]
    task_class = BosonTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        if "QUEUES" not in params:
            self.queues = set()  # boson queues are created on first use: any name is valid
        self._listed_queues = params.get("QUEUES")
        self.database: str | None = (self.options if isinstance(self.options, dict) else {}).get("database")

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Enqueue one call; a created job wakes idle workers when it commits.

        The result of a job it created is built from the row it wrote (what
        :func:`build_result` would read back); a duplicate or parked job is read.
        """
        self.validate_task(task)
        envelope = envelope_for(task, list(args), dict(kwargs))
        using = _db.alias(self.database)
        done = enqueue_one(envelope, using=using)
        created = done.result.disposition == "created"
        result = enqueued_result(task, done.result.id, done.values, self.alias) if created else None
        if result is None:
            result = self.get_result(done.result.id)
        task_enqueued.send(type(self), task_result=result)
        return result

    def check(self, **kwargs: Any) -> Any:
        """Django's checks of a backend, and ``QUEUES`` and ``OPTIONS`` (``boson.E008``, ``E009``)."""
        yield from super().check(**kwargs)
        yield from checks.backend_problems(self.alias, self._listed_queues, self.options)

    def get_result(self, result_id: str) -> Any:
        result = build_result(result_id, self.alias, using=_db.alias(self.database)) if _could_exist(result_id) else None
        if result is None:
            raise TaskResultDoesNotExist(result_id)
        return result


def _could_exist(result_id: Any) -> bool:
    """Whether ``result_id`` could be a job's id: text enqueue accepts as one. Other text
    (a NUL, a lone surrogate) names no result, and querying it raised the driver's error."""
    try:
        validation.job_id(result_id)
    except ValueError:
        return False
    return True


def envelope_for(task: Any, args: list[Any], kwargs: dict[str, Any]) -> services.Envelope:
    """The envelope of one call. A field equal to the registered task's code default is
    left unset, so the TaskConfig row (then the code default) decides it, unless the
    call gave it with ``.using(...)``."""
    name = task.module_path
    registered = registry.get(name)
    defaults = registered.boson_policy() if registered is not None and hasattr(registered, "boson_policy") else {}
    per_call = getattr(task, "per_call", frozenset())

    def given(option: str, value: Any) -> Any:
        return None if option in defaults and defaults[option] == value and option not in per_call else value

    policy = {f: getattr(task, f, None) for f in POLICY_OPTIONS if f != "unique_key"}
    return services.Envelope(
        task=name,
        queue=given("queue", task.queue_name),
        priority=given("priority", task.priority),
        run_at=task.run_after,
        args=args,
        kwargs=kwargs,
        unique_key=given("unique_key", unique_key_for(task, args, kwargs)),
        **{f: given(f, v) for f, v in policy.items() if f in _ENVELOPE_FIELDS},
    )


def unique_key_for(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    """The unique key of one call of ``task``: what its ``unique_key`` function returns for
    the call's arguments, else its fixed key (None when it has neither, or for None)."""
    key = getattr(task, "unique_key", None)
    return key(*args, **kwargs) if callable(key) else key


_ENVELOPE_FIELDS = {f.name for f in fields(services.Envelope)}
#: ``.using(...)`` arguments whose envelope field has another name.
_ENVELOPE_NAMES = {"queue_name": "queue"}
