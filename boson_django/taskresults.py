"""Django ``TaskResult`` views of boson jobs, and the status mapping.

| boson state                        | Django status |
|------------------------------------|---------------|
| scheduled, available, retryable    | READY         |
| running                            | RUNNING       |
| completed, skipped                 | SUCCESSFUL    |
| failed, cancelled, quarantined     | FAILED        |
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import sys
import weakref
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import Signal, receiver

from boson_django import registry
from boson_django.compat import (
    TASKS_MODULE,
    Task,
    TaskError,
    TaskResult,
    TaskResultStatus,
    log_task_finished,
    log_task_started,
    task_backends,
    task_finished,
    tasks_logger,
)
from boson_django.models import Job, JobData, Run
from boson_django.states import ATTEMPT_SPENDING, JobState, Outcome

STATUS = {
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.AVAILABLE: TaskResultStatus.READY,
    JobState.RETRYABLE: TaskResultStatus.READY,
    JobState.RUNNING: TaskResultStatus.RUNNING,
    JobState.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobState.SKIPPED: TaskResultStatus.SUCCESSFUL,
    JobState.FAILED: TaskResultStatus.FAILED,
    JobState.CANCELLED: TaskResultStatus.FAILED,
    JobState.QUARANTINED: TaskResultStatus.FAILED,
}
_SPENDING = {o.value for o in ATTEMPT_SPENDING}
#: The records of an operator's retry and release: kept with the job's attempts, but
#: nothing was raised, so they are no ``TaskError``.
_OPERATOR_ACTIONS = frozenset({"retried", "unquarantined"})
#: Records whose text is no error: an operator's action, and a skip's reason (the job
#: ended ``skipped``, SUCCESSFUL).
_NOT_ERRORS = _OPERATOR_ACTIONS | {Outcome.SKIP.value}


def task_error(text: str) -> TaskError:
    """Errors are stored as ``dotted.ExceptionClass: message`` then the traceback."""
    header, _, rest = (text or "").partition("\n")
    path = header.split(":", 1)[0].strip()
    if not path or " " in path:
        path = "builtins.Exception"
    elif "." not in path:
        path = f"builtins.{path}"
    return TaskError(exception_class_path=path, traceback=rest if _is_traceback(rest) else text)


def _is_traceback(text: str) -> bool:
    """Whether ``text`` is ``traceback.format_exception`` output, which is what Django's
    backends store as ``TaskError.traceback``: the header line before it is boson's own.
    An error with no traceback (a discard, a timeout, a lost lease) keeps its whole text."""
    return text.split("\n", 1)[0].endswith("Traceback (most recent call last):")


def build_result(job_id: str, backend_alias: str, *, using: str) -> Any | None:
    job = Job.objects.using(using).filter(id=job_id).first()
    if job is None:
        return None
    runs = list(
        Run.objects.using(using).filter(job_id=job_id).order_by("started_at", "id")
        .values_list("worker_id", "outcome", "error", "finished_at", "recorded")
    )
    worker_ids = [w for w, outcome, _, finished, _ in runs if finished is None or outcome in _SPENDING]
    errors = [task_error(err) for _, outcome, err, _, recorded in runs
              if recorded and err and outcome not in _NOT_ERRORS]
    if job.state in (JobState.CANCELLED.value, JobState.QUARANTINED.value) and not errors:
        errors.append(task_error(job.last_error))
    task = task_as_stored(job.task, job.queue, job.priority, job.run_at, job.enqueued_at, backend_alias)
    result = TaskResult(
        task=task, id=job.id, status=STATUS[JobState(job.state)], enqueued_at=job.enqueued_at,
        started_at=job.started_at, finished_at=_finished_at(job, runs), last_attempted_at=job.attempted_at,
        args=job.args, kwargs=job.kwargs, backend=backend_alias, errors=errors, worker_ids=worker_ids,
    )
    if job.state == JobState.COMPLETED.value:
        data = JobData.objects.using(using).filter(job_id=job_id, kind=JobData.Kind.RESULT).values_list("data", flat=True).first()
        object.__setattr__(result, "_return_value", data)
    return result


def task_as_stored(
    name: str, queue: str, priority: int, run_at: Any, enqueued_at: Any, backend_alias: str
) -> Any:
    """The registered Task as the job holds it -- its queue and priority (a ``.using(...)``
    override or a TaskConfig row), the backend read from, and ``run_after`` when the job
    is due later than it was enqueued -- as Django's database backend rebuilds a
    result's task from its row. The declared Task itself when nothing differs; a stand-in
    whose ``module_path`` is ``name`` when this process cannot resolve it (reading a
    result never fails for that: see :func:`_stand_in_func`).

    Copied field by field, not through ``Task.using``: that validates the queue again
    against today's ``QUEUES``, which a job enqueued before they changed, or routed by a
    TaskConfig row, need not pass; the stored values were validated at enqueue."""
    declared = _declared(name)
    run_after = run_at if run_at is not None and enqueued_at is not None and run_at > enqueued_at else None
    if declared is None:
        return _made(Task, func=_stand_in_func(name), priority=priority, backend=backend_alias, queue_name=queue,
                     run_after=run_after, takes_context=False)
    if (declared.queue_name, declared.priority, declared.run_after, declared.backend) == (queue, priority, run_after, backend_alias):
        return declared
    return _evolved(declared, queue_name=queue, priority=priority, run_after=run_after, backend=backend_alias)


def _finished_at(job: Job, runs: list[tuple[Any, ...]]) -> Any:
    """When the job finished: it is finalized then, except a quarantined job, which is
    FAILED for Django yet never finalized (it is kept until an operator releases it). That
    one finished when it was quarantined: its last attempt record's end (the crash that
    reached its limit, or the record of its quarantine at enqueue), else its enqueue."""
    if job.finalized_at is not None or job.state != JobState.QUARANTINED.value:
        return job.finalized_at
    return max((finished for _, _, _, finished, _ in runs if finished is not None), default=job.enqueued_at)


def enqueued_result(task: Any, job_id: str, values: dict[str, Any], backend_alias: str) -> Any | None:
    """The READY TaskResult of a job its enqueue just created, from the row it wrote
    (``values``: JSON text args and kwargs, state, enqueued_at) -- what
    :func:`build_result` reads then: no runs, so no errors and no workers. ``None`` for a
    job quarantined at enqueue by a quarantined fingerprint (its error is in its attempt record).

    ``task`` is the Task enqueued, as Django's backends return it: a ``.using(...)``
    copy keeps its priority, queue and run_after (the registered task has the declared ones)."""
    if STATUS[JobState(values["state"])] != TaskResultStatus.READY:
        return None
    return TaskResult(
        task=task, id=job_id, status=TaskResultStatus.READY,
        enqueued_at=values["enqueued_at"], started_at=None, finished_at=None, last_attempted_at=None,
        args=json.loads(values["args"]), kwargs=json.loads(values["kwargs"]), backend=backend_alias,
        errors=[], worker_ids=[],
    )


def from_unit_alone(unit: Any) -> bool:
    """Whether :func:`running_result` can build this job's RUNNING result without a query
    (its first admission, the enqueue time known)."""
    return bool(unit.first_run) and unit.enqueued_at is not None


def running_result(unit: Any, worker_id: str, backend_alias: str) -> Any | None:
    """The RUNNING TaskResult of a job at its first admission, from the admission unit
    alone (no query): what :func:`build_result` reads then -- no earlier runs, so no
    errors, and this worker as the only one. ``None`` if the unit has no history flag."""
    if not from_unit_alone(unit):
        return None
    env = unit.envelope
    return _made(
        TaskResult,
        task=task_as_stored(env.task, env.queue, env.priority, env.run_at, unit.enqueued_at, backend_alias),
        id=env.id, status=TaskResultStatus.RUNNING,
        enqueued_at=unit.enqueued_at, started_at=unit.started_at, finished_at=None,
        last_attempted_at=unit.attempted_at, args=env.args, kwargs=env.kwargs, backend=backend_alias,
        errors=[], worker_ids=[worker_id],
    )


def completed_result(started: Any, finished_at: Any, return_value: Any) -> Any:
    """The stored result of a first-run job its worker acked SUCCESS (completed, kept), built
    from its :func:`running_result` -- equal to what :func:`build_result` reads after the ack."""
    return _evolved(started, status=TaskResultStatus.SUCCESSFUL, finished_at=finished_at, errors=[],
                    worker_ids=list(started.worker_ids), _return_value=return_value)


def _evolved(result: Any, **changes: Any) -> Any:
    """A copy of a TaskResult (or a Task) with ``changes``. Not ``dataclasses.replace``:
    that runs ``__init__`` and so normalises the arguments' JSON again, which a started
    result's already are, and validates a Task again."""
    return _builders(type(result))[1](result, **changes)


def _made(cls: type, **values: Any) -> Any:
    """A TaskResult of arguments read back from the store: their JSON is already what
    ``__post_init__`` would normalise it to, so ``__init__`` is skipped. Fields not given
    keep their defaults; one with no default is required."""
    return _builders(cls)[0](**values)


def _builders(cls: type) -> tuple[Any, Any]:
    """The class's two builders, made once per class: ``make(**fields)`` and
    ``evolve(result, **changes)``, each setting every field by name in one function body
    -- what ``dataclasses`` does for ``__init__``, without ``__post_init__``."""
    built = _BUILDERS.get(cls)
    if built is None:
        built = _BUILDERS[cls] = _compile_builders(cls)
    return built


def _compile_builders(cls: type) -> tuple[Any, Any]:
    fields = [(f.name, f.default) for f in dataclasses.fields(cls)]
    scope: dict[str, Any] = {"cls": cls, "new": object.__new__, "KEEP": _KEEP}
    params, puts, keeps = [], [], []
    for i, (name, default) in enumerate(fields):
        if default is dataclasses.MISSING:
            params.append(name)
        else:
            scope[f"d{i}"] = default
            params.append(f"{name}=d{i}")
        slot = cls.__dict__.get(name)  # a slotted class's field: its descriptor sets it directly
        scope[f"s{i}"] = slot.__set__ if inspect.ismemberdescriptor(slot) else functools.partial(_set_attr, name=name)
        puts.append(f"    s{i}(o, {name})\n")
        keeps.append(f"    s{i}(o, r.{name} if {name} is KEEP else {name})\n")
    source = (
        f"def make(*, {', '.join(params)}):\n    o = new(cls)\n{''.join(puts)}    return o\n"
        f"def evolve(r, *, {', '.join(f'{name}=KEEP' for name, _ in fields)}):\n    o = new(cls)\n{''.join(keeps)}    return o\n"
    )
    exec(source, scope)  # noqa: S102 -- field names of a dataclass, nothing from outside
    return scope["make"], scope["evolve"]


def _set_attr(obj: Any, value: Any, *, name: str) -> None:
    object.__setattr__(obj, name, value)


_BUILDERS: dict[type, tuple[Any, Any]] = {}
_KEEP: Any = object()


def send(signal: Signal, result: Any) -> None:
    """Send one of Django's task signals for ``result``, from its backend's class.

    Calls the receivers ``Signal.send`` would, in its order, without asking the signal
    to resolve them again each time: the task signals cache nothing
    (``use_caching=False``), and resolving them takes a lock, a walk over every
    receiver and weak references dereferenced. The receivers are resolved again whenever the
    signal's list changes (connect, disconnect, a dead receiver cleared); they are
    held weakly, as the signal holds them, and one that died or an async receiver
    sends through ``Signal.send`` itself."""
    sender = _backend_class(result.backend)
    refs = _resolved(signal, sender)[0]
    if refs is None:
        signal.send(sender, task_result=result)
        return
    receivers = [ref() for ref in refs]
    if None in receivers:  # one died: the signal drops it, and this resolves again next time
        _RECEIVERS.pop((signal, sender), None)
        signal.send(sender, task_result=result)
        return
    for receiver_ in receivers:
        receiver_(signal=signal, sender=sender, task_result=result)


def send_finished(result: Any, exception: BaseException | None) -> None:
    """``task_finished`` for ``result``. After a handler's exception it is sent as Django's
    backends send it, from inside the ``except`` handling that exception: receivers see it
    in ``sys.exc_info()``, and Django's logging receiver attaches it to a failure's ERROR
    line (what error monitoring reads). The worker drops its traceback once the outcome is
    settled, sent or not (``Finish.let_go``)."""
    if exception is None:
        send(task_finished, result)
        return
    try:
        raise exception
    except BaseException:  # noqa: BLE001 -- the handler's own, raised again to be the one handled
        send(task_finished, result)


def unheard(signal: Signal, backend_alias: str, level: int = logging.INFO) -> bool:
    """Whether sending ``signal`` now would reach no one: its only receivers are the Tasks
    framework's own logging ones and the framework's logger drops a line at ``level``
    (the level they log a result at: INFO, ERROR for a failed one). The worker then
    builds no TaskResult for it. Any other receiver, or the logger letting the line
    through, and the signal is sent as ever."""
    return _resolved(signal, _backend_class(backend_alias))[1] and not tasks_logger.isEnabledFor(level)


def _log_task_finished(sender: type, task_result: Any, **kwargs: Any) -> None:
    """The backport's ``log_task_finished`` as Django 6 has it. The backport logs a
    failure with ``logger.exception``, assuming the signal is sent inside the ``except``
    that caught the error; a worker sends it after the ack, with no exception active, so
    every failed job logged a stray ``NoneType: None`` line under its own. Sent in its
    place (Django 5.2 only): ERROR for a failure, the exception attached when one is
    active."""
    exc_info = sys.exc_info()
    tasks_logger.log(
        logging.ERROR if task_result.status == TaskResultStatus.FAILED else logging.INFO,
        "Task id=%s path=%s state=%s", task_result.id, task_result.task.module_path, task_result.status,
        exc_info=exc_info if exc_info[0] else None,
    )


def use_django6_finished_logging() -> None:
    """On the backport, put :func:`_log_task_finished` in place of its receiver, for
    every sender and however the signal is sent (``Signal.send`` included, which runs
    the receivers itself when an async one is connected). Sent inside an ``except``,
    as other backends send it, it logs what the backport's did."""
    if TASKS_MODULE == "django_tasks" and task_finished.disconnect(log_task_finished):
        task_finished.connect(_log_task_finished)


#: The receivers the Tasks framework connects to its own signals: they only log.
_FRAMEWORK_LOGGING = frozenset({log_task_started, log_task_finished, _log_task_finished})


def _resolved(signal: Signal, sender: type) -> tuple[list[Any] | None, bool]:
    """The signal's receivers for ``sender`` as weak references (None: leave them to
    ``Signal.send``), and whether each is one of the framework's logging receivers."""
    key = (signal, sender)
    listed = tuple(signal.receivers)
    known = _RECEIVERS.get(key)
    if known is None or known[0] != listed:
        refs = _receiver_refs(signal, sender)
        quiet = refs is not None and all(ref() in _FRAMEWORK_LOGGING for ref in refs)
        known = _RECEIVERS[key] = (listed, refs, quiet)
    return known[1], known[2]


#: (signal, sender) -> (the signal's receivers list as last seen, weak references to the
#: receivers it resolved to for that sender -- None: send through ``Signal.send`` --, and
#: whether they are all the framework's logging receivers).
_RECEIVERS: dict[tuple[Signal, type], tuple[tuple[Any, ...], list[Any] | None, bool]] = {}


def _receiver_refs(signal: Signal, sender: type) -> list[Any] | None:
    sync_receivers, async_receivers = signal._live_receivers(sender)
    if async_receivers:
        return None  # Signal.send runs them (async_to_sync): leave it to it
    try:
        return [weakref.WeakMethod(r) if inspect.ismethod(r) else weakref.ref(r) for r in sync_receivers]
    except TypeError:  # a receiver that cannot be weakly referenced
        return None


@functools.cache
def _backend_class(alias: str) -> type:
    """The sender of the task signals. Cached: ``task_backends[alias]`` goes through a
    thread-local lookup."""
    return type(task_backends[alias])


@receiver(setting_changed)
def _forget_backend_classes(*, setting: str, **kwargs: Any) -> None:
    if setting == "TASKS":
        _backend_class.cache_clear()


def _declared(name: str) -> Any | None:
    """The Task named ``name`` in this process, or None when it cannot be resolved."""
    try:
        return registry.get(name)
    except Exception:  # noqa: BLE001 -- importing the task's module failed: a result is still read
        return None


def _stand_in_func(name: str) -> Any:
    """The function of the stand-in Task of a result whose task this process cannot
    resolve (renamed or removed in a deploy, its module not importable here, a name of
    something that is not a Task): named so that the Task's ``module_path`` is the stored
    ``name``; calling it raises ``LookupError``. The Task is built without
    ``Task.__post_init__``, as a result's stored values were validated at enqueue."""
    module, _, qualname = name.rpartition(".")

    def unresolved(*args: Any, **kwargs: Any) -> Any:
        raise LookupError(f"task {name!r} cannot be resolved in this process: its result can be read, not run")

    unresolved.__module__, unresolved.__qualname__, unresolved.__name__ = module, qualname, qualname
    return unresolved
