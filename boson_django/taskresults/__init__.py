"""Django ``TaskResult`` views of boson jobs, and the status mapping.

| boson state                        | Django status |
|------------------------------------|---------------|
| scheduled, available, retryable    | READY         |
| running                            | RUNNING       |
| completed, skipped                 | SUCCESSFUL    |
| failed, cancelled, quarantined     | FAILED        |

Built without ``__init__`` (:mod:`.builders`); sent through :mod:`.signals`.
"""

from __future__ import annotations

import json
from typing import Any

from boson_django import registry
from boson_django.compat import Task, TaskError, TaskResult, TaskResultStatus
from boson_django.models import Job, JobData, Run
from boson_django.states import ATTEMPT_SPENDING, JobState, Outcome
from boson_django.taskresults.builders import _evolved, _made
from boson_django.taskresults.signals import send, send_finished, unheard, use_django6_finished_logging

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


__all__ = [
    "STATUS", "build_result", "completed_result", "enqueued_result", "from_unit_alone", "running_result", "send",
    "send_finished", "task_as_stored", "task_error", "unheard", "use_django6_finished_logging",
]
