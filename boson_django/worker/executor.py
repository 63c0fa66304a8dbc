"""Call a job's task and turn whatever happens into a :class:`Finish`.

The job's task name is resolved through :func:`boson_django.registry.resolve` and nowhere
else: a row naming anything that is not a module-level ``Task`` of a boson backend is
never called; it ends ``UNDECODABLE`` with an error that says why (a module that fails to
import included). Every exception of the
handler becomes RETRY (the services decide backoff and give-up); the outcome helpers of
the context become their outcome. Nothing here writes a transition: the runtime acks.

Sync handlers run on a pool of daemon threads, async handlers on one event-loop
thread. Daemon threads rather than ``ThreadPoolExecutor`` because a handler that
ignores every request to stop must not keep the process alive after shutdown has
released its job (``ThreadPoolExecutor`` joins its threads at interpreter exit).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connections
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from boson_django import registry, taskresults, tracing
from boson_django.compat import task_started
from boson_django.services.jobrows import UNREADABLE
from boson_django.states import Outcome
from boson_django.worker import logcapture, network
from boson_django.worker.attempt import Attempt
from boson_django.worker.context import BosonContext
from boson_django.worker.futures import JobFuture
from boson_django.worker.outcomes import Control, Finish, TransactionLeftOpen, failure, undecodable, unstorable
from boson_django.worker.threads import DaemonPool, LoopThread


#: Task name -> (the registered Task or None, whether it is async): what one batch of
#: admitted jobs looked up, so each name is resolved once per batch rather than per job.
Known = dict[str, tuple[Any, bool]]


def resolve(attempt: Attempt, known: Known) -> Any | Finish:
    """The registered Task this job names, or the UNDECODABLE finish explaining why not."""
    envelope = attempt.unit.envelope
    found = _task_named(envelope.task, known)[0]
    if found is None:
        why = registry.why_unknown(envelope.task)
        return undecodable(f"job {attempt.job_id} names {envelope.task!r}, which is not a task this worker can run: {why}")
    if not isinstance(envelope.args, list) or not isinstance(envelope.kwargs, dict):
        return undecodable(f"job {attempt.job_id} has arguments that are not a list and a dict")
    if attempt.unit.checkpoint is UNREADABLE:
        return undecodable(f"job {attempt.job_id} has a checkpoint Python cannot decode")
    return found


def _task_named(name: str, known: Known) -> tuple[Any, bool]:
    entry = known.get(name)
    if entry is None:
        found = registry.get(name)
        entry = known[name] = (None, False) if found is None else (found, is_async(found))
    return entry


def is_async(task: Any) -> bool:
    return inspect.iscoroutinefunction(task.func)


def _started(attempt: Attempt, task: Any) -> tuple[Any, list[Any]]:
    """Build the RUNNING TaskResult, send ``task_started`` and the call's arguments. A
    first run whose signal no one would receive, for a task that takes no context, gets
    no TaskResult now (``Attempt.started`` builds it if the finish needs it)."""
    unit = attempt.unit
    if taskresults.from_unit_alone(unit) and not task.takes_context and taskresults.unheard(task_started, task.backend):
        attempt.unbuilt_result_for = task.backend
        return None, list(unit.envelope.args)
    result = taskresults.running_result(unit, attempt.worker_id, task.backend)
    if result is None:  # the job has history (earlier runs): read it from the store
        result = taskresults.build_result(attempt.job_id, task.backend, using=attempt.using)
    attempt.started_result = result
    if result is not None:
        taskresults.send(task_started, result)
    args = list(unit.envelope.args)
    if task.takes_context:
        args.insert(0, BosonContext(result, attempt))
    return result, args


#: Return values JSON stores as they are: no round trip through the encoder needed.
_JSON_AS_IS = (type(None), bool, int, str)


#: The finish of a handler that returned None, the commonest: one object for all of them.
_RETURNED_NONE = Finish(Outcome.SUCCESS)


def _succeeded(value: Any) -> Finish:
    """A return value is stored as JSON (as Django's backends normalise it). One JSON
    cannot hold (an object, NaN, an infinity) fails the job at once, naming ``return
    value``: not retried, as every retry would run the task again to return it again.
    The ack checks what the store can hold (``MAX_RESULT_BYTES``, no NUL), and a refused
    one fails the job the same way (``completer``)."""
    if value is None:
        return _RETURNED_NONE
    if type(value) in _JSON_AS_IS:
        return Finish(Outcome.SUCCESS, result=value)
    try:
        stored = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        return unstorable(TypeError(f"return value is not JSON serializable: {exc}"))
    return Finish(Outcome.SUCCESS, result=stored)


#: What a sync handler raises that becomes its attempt's outcome. ``SystemExit`` is the
#: handler's ``sys.exit()``, not the worker's: Django's own backends record every exception
#: but ``KeyboardInterrupt`` as the task's failure, which inline (``run_until_idle`` in the
#: main thread) is a Ctrl-C. On a pool thread anything else is delivered as a failure too;
#: async handlers get everything but cancellation (escaping, ``SystemExit`` ended the event
#: loop every async handler shares, and their jobs stayed running until reclaimed).
HANDLER_FAILURES = (Exception, SystemExit)


def _ended(exc: BaseException) -> Finish:
    if isinstance(exc, Control):
        return exc.finish()
    return failure(exc)


def run_sync(attempt: Attempt, task: Any) -> Finish:
    """Run a sync (or, inline, an async) handler in the calling thread."""
    with logcapture.capturing(attempt) as logs:
        attempt.logs = logs
        try:
            _, args = _started(attempt, task)
            value = task.call(*args, **attempt.unit.envelope.kwargs)
            finish = _succeeded(value)
        except HANDLER_FAILURES as exc:
            finish = _ended(exc)
    return finish.with_logs(logs.collect())


async def run_async(attempt: Attempt, task: Any) -> Finish:
    """Run an async handler on the event loop; cancellation (timeout, lost lease) ends it."""
    with logcapture.capturing(attempt) as logs:
        attempt.logs = logs
        try:
            _, args = await sync_to_async(_started)(attempt, task)
            value = await task.func(*args, **attempt.unit.envelope.kwargs)
            finish = _succeeded(value)
        except asyncio.CancelledError:
            finish = failure(attempt.interruption or asyncio.CancelledError("handler cancelled"))
        except BaseException as exc:  # noqa: BLE001 -- no signal reaches the loop thread: whatever
            finish = _ended(exc)  # is raised here is the handler's, and escaping it ends the loop
        finally:
            left_open = await sync_to_async(end_connections)()  # the thread its sync calls used
    return _unless_left_open(finish, left_open).with_logs(logs.collect())


class _ThreadState(threading.local):
    #: This thread opened a database connection at some point (``connection_created``).
    opened_connection = False


_thread_state = _ThreadState()


@receiver(connection_created, dispatch_uid="boson_django.worker.executor.opened_connection")
def _note_connection_opened(sender: Any, connection: Any, **kwargs: Any) -> None:
    _thread_state.opened_connection = True


def end_connections() -> list[str]:
    """After a job on a worker thread: close its connections (or keep them, under
    ``CONN_MAX_AGE``), as Django does after a request; returns the aliases on which the
    handler left a transaction open.

    Such a connection is closed (the server rolls the transaction back) and its wrapper
    dropped, so the thread's next job gets a fresh one: Django's wrapper still believes
    it is inside the transaction, and every later query on this thread -- of every job
    it runs, their context calls included -- failed on the closed connection."""
    left_open = []
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            left_open.append(connection.alias)
            try:
                connection.close()
            except Exception:  # noqa: BLE001 -- it is discarded either way
                pass
            del connections[connection.alias]
            network.harden(connections[connection.alias])
    close_old_connections()
    return left_open


def _unless_left_open(finish: Finish, left_open: list[str]) -> Finish:
    """A handler that returned inside a transaction lost its writes: its attempt fails."""
    if not left_open:
        return finish
    aliases = ", ".join(repr(alias) for alias in left_open)
    exc = TransactionLeftOpen(f"the handler returned inside a transaction it never closed (database {aliases}); "
                              "its writes were rolled back")
    return failure(exc).with_logs(list(finish.logs))


def _in_thread(attempt: Attempt, task: Any) -> Finish:
    """Pool-thread wrapper: the job's DB connections are ended after it
    (:func:`end_connections`). Only after: the previous job on this thread did the same,
    so a second pass before would find nothing to do. Only on a thread that ever opened
    a connection: a thread that never did has none to end. Inside the attempt's span, so
    the span reports the failure of a handler that left a transaction open."""
    return tracing.around_attempt(attempt, lambda: _run_then_end_connections(attempt, task))


def _run_then_end_connections(attempt: Attempt, task: Any) -> Finish:
    left_open: list[str] = []
    try:
        finish = run_sync(attempt, task)
    finally:
        if _thread_state.opened_connection:
            left_open = end_connections()
    return _unless_left_open(finish, left_open)


class Executor:
    """Starts attempts; each returns a Future of its Finish (never an exception)."""

    def __init__(self, concurrency: int, name: str = "boson"):
        self.pool = DaemonPool(concurrency, f"{name}-job")
        self._loop: LoopThread | None = None
        self._name = name

    def submit(self, attempt: Attempt, on_done: Callable[[Any], None], known: Known) -> Future[Finish] | JobFuture:
        """Start the attempt; ``known`` is the batch's lookups of task names, shared
        between the calls for one batch."""
        found = resolve(attempt, known)
        future: Future[Finish] | JobFuture
        if isinstance(found, Finish):  # undecodable: no handler runs, but the attempt has its span
            future = attempt.future = JobFuture(on_done)
            future.settle(tracing.around_attempt(attempt, lambda: found))
        elif _task_named(attempt.unit.envelope.task, known)[1]:
            future = attempt.future = self._loop_thread().submit(
                tracing.around_attempt_async(attempt, run_async(attempt, found))
            )
            future.add_done_callback(on_done)
        else:
            future = attempt.future = JobFuture(on_done)
            self.pool.submit(lambda: _in_thread(attempt, found), future)
        return future

    def _loop_thread(self) -> LoopThread:
        if self._loop is None:
            self._loop = LoopThread(f"{self._name}-loop")
        return self._loop

    def shutdown(self) -> None:
        self.pool.shutdown()
        if self._loop is not None:
            self._loop.shutdown()
