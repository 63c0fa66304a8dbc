"""Hand an attempt's Finish to the store (``services.ack``) and tell Django about it.

Shared by the worker loop and :mod:`boson_django.testing`, so users' tests go through the
same acks as production. A refused ack (the lease was lost) is logged and dropped: the
store already belongs to someone else. A database error propagates, so the loop can
retry the ack once the connection is back (the lease is renewed meanwhile).

A SUCCESS ack also runs the effects the handler registered with ``context.in_ack``, in
the ack's own transaction: they commit if and only if the fenced ack does. An effect
that raises rolls the ack back and the attempt is acked RETRY with its error instead;
a lost connection propagates like any database error (the retry runs them again).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import InterfaceError, OperationalError

from boson_django import clock, services, taskresults
from boson_django.errors import InvalidEnvelope, LeaseRejected
from boson_django import database
from boson_django.states import Outcome
from boson_django.worker import discarding
from boson_django.worker.attempt import Attempt
from boson_django.worker.logtext import one_line
from boson_django.worker.outcomes import Finish, error_text, refused_result, unstorable

log = logging.getLogger("boson_django.worker")


def deliver(attempt: Attempt, finish: Finish) -> str | None:
    """Ack the attempt; returns the job's new state (None: deleted or refused). A
    database error propagates, ``finish`` untouched, for the loop to deliver it again."""
    state = _deliver(attempt, finish)
    finish.let_go()
    return state


def _deliver(attempt: Attempt, finish: Finish) -> str | None:
    if attempt.settled:
        log.warning("boson: job %s finished after its lease was lost; outcome %s not stored",
                    attempt.job_id, finish.outcome.value)
        return None
    (_, finish), = discarding.apply([(attempt, finish)], attempt.using)  # discard_on: DISCARD
    try:
        state, finish = _ack(attempt, finish)
    except LeaseRejected as exc:
        log.warning("boson: job %s finished but its lease was lost; outcome %s not stored (%s)",
                    attempt.job_id, finish.outcome.value, exc)
        attempt.settled = True
        return None
    attempt.settled = True
    log_outcome(attempt, finish, state)
    finished_signal(attempt, finish)
    return state


class _EffectFailed(Exception):
    """An in-ack effect raised (not a lost connection): the ack is rolled back."""


def _ack(attempt: Attempt, finish: Finish) -> tuple[str | None, Finish]:
    """The job's new state, and the finish stored: ``finish``, or the one stored instead
    when the ack refused it."""
    try:
        if finish.outcome is Outcome.SUCCESS and attempt.effects:
            return _ack_with_effects(attempt, finish, using=attempt.using), finish
        return services.ack(
            attempt.lease, finish.outcome, error=finish.error, delay_ms=finish.delay_ms,
            logs=list(finish.logs), actual_weight=attempt.actual_weight, result=finish.result, using=attempt.using,
        ), finish
    except (InvalidEnvelope, _EffectFailed) as exc:
        instead = instead_of_refused(exc, finish)
        state = services.ack(attempt.lease, instead.outcome, error=instead.error, logs=list(instead.logs),
                             actual_weight=attempt.actual_weight, using=attempt.using)
        return state, instead


def instead_of_refused(exc: Exception, finish: Finish) -> Finish:
    """What is acked when the ack of ``finish`` was refused: a return value the store
    cannot hold fails the job (DISCARD, see ``outcomes.unstorable``); a bad delay or a
    failing in-ack effect is a handler failure (RETRY)."""
    if isinstance(exc, InvalidEnvelope) and exc.field == "result":
        return unstorable(refused_result(exc)).with_logs(list(finish.logs))
    cause = exc.__cause__ if isinstance(exc, _EffectFailed) and exc.__cause__ else exc
    return Finish(Outcome.RETRY, error=error_text(cause), logs=finish.logs)


@database.store_transaction
def _ack_with_effects(attempt: Attempt, finish: Finish, *, using: str | None = None) -> str | None:
    """The fenced SUCCESS ack and the handler's in-ack effects, in one transaction."""
    state = services.ack(attempt.lease, finish.outcome, logs=list(finish.logs), actual_weight=attempt.actual_weight,
                         result=finish.result, using=using)
    for effect in attempt.effects:
        try:
            effect()
        except (OperationalError, InterfaceError):
            raise  # the connection, not the effect: the loop retries the whole ack
        except Exception as exc:  # noqa: BLE001 -- the handler's effect failed
            raise _EffectFailed(str(exc)) from exc
    return state


def log_outcome(attempt: Attempt, finish: Finish, state: str | None) -> None:
    """One line per stored outcome: a warning with the error's first line for a failure."""
    if finish.error and finish.outcome in (Outcome.RETRY, Outcome.UNDECODABLE, Outcome.DISCARD):
        log.warning("boson: job %s (%s) -> %s: %s", attempt.job_id, attempt.unit.envelope.task,
                    state or "deleted", one_line(finish.error.split("\n", 1)[0]))
    elif log.isEnabledFor(logging.INFO):  # the success line is hot: skip building it when unseen
        log.info("boson: job %s (%s) -> %s", attempt.job_id, attempt.unit.envelope.task, state or "deleted")


def finished_signal(attempt: Attempt, finish: Finish, acked_at: datetime | None = None) -> None:
    """Django's ``task_finished`` with the job's TaskResult after the ack (``acked_at``:
    the ack's store time, when the caller knows it)."""
    started = attempt.started()
    if started is None:
        return  # undecodable: there is no Task to report on
    try:
        result = taskresults.build_result(attempt.job_id, started.backend, using=attempt.using)
        if result is None:
            result = _deleted(started, finish, acked_at or clock.now(attempt.using))
        taskresults.send_finished(result, finish.exception)
    except Exception:  # noqa: BLE001 -- a receiver's bug must not stop the worker
        log.exception("boson: a task_finished receiver failed for job %s", attempt.job_id)


def _deleted(started: Any, finish: Finish, acked_at: datetime) -> Any:
    """The result of a job deleted at its ack (retention 0): built from the started one,
    finished when it was acked on the store clock (as its start was stamped)."""
    return taskresults.completed_result(started, acked_at, finish.result)
