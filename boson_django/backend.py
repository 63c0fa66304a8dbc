"""The Django Tasks backend: ``TASKS = {"default": {"BACKEND": "boson_django.backend.BosonBackend"}}``.

One code path for ``django.tasks`` (Django 6) and the ``django_tasks`` backport
(Django 5.2); see :mod:`boson_django.compat`.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from django.utils.module_loading import import_string

from boson_django import _installed, checks, discards, registry, services, validation  # noqa: F401 -- _installed first
from boson_django.compat import (
    BaseTaskBackend,
    Task,
    TaskResultDoesNotExist,
    task_enqueued,
)
from boson_django.errors import InvalidEnvelope, InvalidTask
from boson_django.keys import unique_key_for
from boson_django.schedules.spec import Schedule, as_schedules
from boson_django import database
from boson_django.services.enqueue import POLICY_CHECKS, enqueue_one
from boson_django.taskresults import build_result, enqueued_result

#: Boson's per-task policy, accepted by ``@task(...)`` and ``.using(...)``.
POLICY_OPTIONS = (
    "max_attempts", "unique_key", "rate_class", "weight", "retention_ms", "lease_ms",
    "timeout_ms", "crash_limit", "discard_on",
)
_POLICY = frozenset(POLICY_OPTIONS)
#: What Django's ``Task.using`` takes (a value of None leaves the task's).
_DJANGO_USING = frozenset(inspect.signature(Task.using).parameters) - {"self"}
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
                raise InvalidTask(name, "is set per task (@task(...) or its TaskConfig row), not per call with .using()")
        unknown = changes.keys() - _DJANGO_USING - _POLICY
        if unknown:
            raise TypeError(f"using() got an unexpected keyword argument {min(unknown)!r}")
        # One copy, checked once: Django's options as its Task.using sets them (None keeps
        # the task's), boson's as given (None: TaskConfig, then settings, decide).
        given = {k: v for k, v in changes.items() if v is not None or k in _POLICY}
        per_call = self.per_call | {_ENVELOPE_NAMES.get(k, k) for k, v in changes.items() if v is not None}
        return replace(self, **given, per_call=per_call)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as Django 6.1 pickles a Task, by its module path, on the backport too
        (whose Task does not pickle). A ``unique_key`` function that is the declared
        task's (a lambda, often) is left out and taken from the declared task again when
        unpickled; another function pickles as Python pickles functions (by reference:
        a lambda given only to ``.using(...)`` cannot be pickled)."""
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["func"] = self.module_path
        if callable(self.unique_key) and self.unique_key is getattr(_task_at(self.module_path), "unique_key", None):
            state["unique_key"] = _Pickled.DECLARED_KEY
        return (_unpickled, (type(self), state))

    def boson_policy(self) -> dict[str, Any]:
        """The code defaults ``registry.defaults_for`` reports for this task."""
        found = {name: getattr(self, name) for name in POLICY_OPTIONS if name != "unique_key"}
        if isinstance(self.unique_key, str):
            found["unique_key"] = self.unique_key
        found.update(queue=self.queue_name, priority=self.priority)
        return found


def _discard_on(value: Any) -> tuple[Any, ...]:
    """``@task(discard_on=...)`` as a tuple of classes and paths; a class that is not an
    exception, or anything else, raises ``InvalidTask`` naming ``discard_on``."""
    try:
        listed = discards.entries(value)
        discards.classes(tuple(entry for entry in listed if isinstance(entry, type)))
    except InvalidEnvelope as exc:
        raise InvalidTask(exc.field, exc.reason) from None
    return listed


class _Pickled(enum.Enum):
    #: A pickled task's ``unique_key`` is its declared task's.
    DECLARED_KEY = "declared"


def _task_at(path: str) -> Any | None:
    """The object at ``path``: a Task's module path names its declared Task."""
    try:
        return import_string(path)
    except ImportError:
        return None


def _unpickled(cls: type, state: dict[str, Any]) -> Any:
    """A pickled task (:meth:`BosonTask.__reduce__`) rebuilt from its declared task, found
    by its module path; ``ValueError`` when that is no Task any more, as Django raises."""
    path = state["func"]
    declared = _task_at(path)
    if not isinstance(declared, Task):
        raise ValueError(f"Expected {path!r} to point to a Task instance.")
    state["func"] = declared.func
    if state.get("unique_key") is _Pickled.DECLARED_KEY:
        state["unique_key"] = getattr(declared, "unique_key", None)
    return cls(**state)


class BosonBackend(BaseTaskBackend):  # type: ignore[misc,valid-type,unused-ignore]
    task_class = BosonTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True
    #: What :mod:`boson_django.registry` looks for to tell a boson backend (subclasses too).
    boson_store = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        if "QUEUES" not in params:
            self.queues = set()  # boson queues are created on first use: any name is valid
        self._listed_queues = params.get("QUEUES")
        self.database: str | None = (self.options if isinstance(self.options, dict) else {}).get("database")

    def validate_task(self, task: Any) -> None:
        """Django's checks, then what the store must be able to hold: the task's name, its
        queue name and its boson policy. Raises ``InvalidTask`` naming the field; Django
        calls this from ``Task.__post_init__``: at ``@task`` and at ``.using()``."""
        super().validate_task(task)
        try:
            _check_policy(task)
        except InvalidEnvelope as exc:
            raise InvalidTask(exc.field, exc.reason) from None

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Enqueue one call; a created job wakes idle workers when it commits.

        The result of a job it created is built from the row it wrote (what
        :func:`build_result` would read back); a duplicate or quarantined job is read.
        A refusal of the task or of its policy (a task the worker may not run, a unique
        key its function made too long) is ``InvalidTask``; one of the arguments stays
        ``InvalidEnvelope`` (``UnsupportedType``, a ``TypeError``, for a type JSON cannot hold).

        Django's checks of the task run again, as in Django's own backends (``QUEUES`` may
        have changed since the task was made); boson's, of values a frozen task cannot
        change, are not repeated (they ran when it was made): the envelope's own
        checks refuse the same values, as ``InvalidTask`` too, for a task made otherwise.
        """
        BaseTaskBackend.validate_task(self, task)
        envelope = envelope_for(task, list(args), dict(kwargs))
        using = database.alias(self.database)
        try:
            done = enqueue_one(envelope, using=using)
        except InvalidEnvelope as exc:
            if exc.field not in _TASK_FIELDS or isinstance(exc, InvalidTask):
                raise
            raise InvalidTask(exc.field, exc.reason) from None
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
        result = build_result(result_id, self.alias, using=database.alias(self.database)) if _could_exist(result_id) else None
        if result is None:
            raise TaskResultDoesNotExist(result_id)
        return result


def _check_policy(task: Any) -> None:
    """``InvalidEnvelope`` naming the first field of ``task`` enqueue would refuse: its
    name, its queue name, a boson policy option (``unique_key``: a key the store can
    hold, or a function of the call's arguments)."""
    validation.name(task.module_path, "task", max_len=255)
    validation.name(task.queue_name, "queue_name")
    for option in POLICY_OPTIONS:
        value = getattr(task, option, None)
        if value is None or option not in POLICY_CHECKS:  # unique_key below; discard_on: _discard_on
            continue
        POLICY_CHECKS[option](value, None)
    key = getattr(task, "unique_key", None)
    if isinstance(key, str):
        validation.name(key, "unique_key", max_len=validation.MAX_KEY, key=True)
    elif key is not None and not callable(key):
        raise InvalidEnvelope("unique_key", f"must be a string or a function of the task's arguments, got {key!r:.60}")


#: The envelope fields whose refusal at enqueue is the task's (``InvalidTask``), not the
#: arguments'.
_TASK_FIELDS = frozenset({"task", "queue", "priority", "unique_key", "run_at", *POLICY_OPTIONS})


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


_ENVELOPE_FIELDS = {f.name for f in fields(services.Envelope)}
#: ``.using(...)`` arguments whose envelope field has another name.
_ENVELOPE_NAMES = {"queue_name": "queue"}
