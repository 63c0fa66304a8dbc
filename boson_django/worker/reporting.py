"""Tell the log and Django of an outcome the store has just recorded.

Called by :mod:`.completer` once per stored ack, after its transaction committed: one
log line, then Django's ``task_finished`` with the job's TaskResult. Reads the store
only when the result cannot be built in memory; never writes. A receiver's exception is
logged, never raised: it must not stop the worker.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from boson_django import clock, taskresults
from boson_django.compat import task_finished
from boson_django.services import AckReply
from boson_django.states import JobState, Outcome
from boson_django.worker.attempt import Attempt
from boson_django.worker.logtext import one_line
from boson_django.worker.outcomes import Finish

log = logging.getLogger("boson_django.worker")


def report(attempt: Attempt, finish: Finish, reply: AckReply, unheard: dict[str, bool]) -> None:
    """The log line and ``task_finished`` of a stored ack. ``unheard`` caches, per
    backend alias, whether ``task_finished`` would reach no one (asked once per flush)."""
    log_outcome(attempt, finish, reply.state)
    _signal(attempt, finish, reply, unheard)


def log_outcome(attempt: Attempt, finish: Finish, state: str | None) -> None:
    """One line per stored outcome: a warning with the error's first line for a failure."""
    if finish.error and finish.outcome in (Outcome.RETRY, Outcome.UNDECODABLE, Outcome.DISCARD):
        log.warning("boson: job %s (%s) -> %s: %s", attempt.job_id, attempt.unit.envelope.task,
                    state or "deleted", one_line(finish.error.split("\n", 1)[0]))
    elif log.isEnabledFor(logging.INFO):
        log.info("boson: job %s (%s) -> %s", attempt.job_id, attempt.unit.envelope.task, state or "deleted")


def _signal(attempt: Attempt, finish: Finish, reply: AckReply, unheard: dict[str, bool]) -> None:
    """``task_finished``: built in memory for a first-run job acked completed at a known
    store time, else read from the store; not at all for the former when no one heard of
    its start either (see ``executor._started``) and no one would hear of its end."""
    in_memory = reply.at is not None and attempt.unit.first_run and reply.state == JobState.COMPLETED.value
    unbuilt = attempt.unbuilt_result_for
    if in_memory and unbuilt is not None:
        quiet = unheard.get(unbuilt)
        if quiet is None:
            quiet = unheard[unbuilt] = taskresults.unheard(task_finished, unbuilt)
        if quiet:
            return
    started = attempt.started()
    if started is None:
        return  # undecodable: there is no Task to report on
    try:
        if in_memory:
            taskresults.send(task_finished, taskresults.completed_result(started, reply.at, finish.result))
        else:
            _send_stored(attempt, started, finish, reply.at)
    except Exception:  # noqa: BLE001 -- a receiver's bug must not stop the worker
        log.exception("boson: a task_finished receiver failed for job %s", attempt.job_id)


def _send_stored(attempt: Attempt, started: Any, finish: Finish, acked_at: datetime | None) -> None:
    """``task_finished`` with the result read from the store; a job deleted at its ack
    (retention 0) gets one built from its started result, finished at ``acked_at`` (the
    ack's store time), as its start was stamped."""
    result = taskresults.build_result(attempt.job_id, started.backend, using=attempt.using)
    if result is None:
        result = taskresults.completed_result(started, acked_at or clock.now(attempt.using), finish.result)
    taskresults.send_finished(result, finish.exception)
