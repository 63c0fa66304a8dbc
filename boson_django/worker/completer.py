"""Flush the attempts that finished since the last tick to the store in one transaction
(``services.ack_many``), then tell Django about each.

Each ack in the flush is fenced on its own: a lease lost meanwhile is refused and logged
while the others apply. A bad argument from the handler (e.g. a negative snooze delay)
is a handler failure: that attempt is acked RETRY in a second flush. A database error
propagates, so the loop retries the whole flush once the connection is back (nothing of
it was written). Attempts with in-ack effects go through :func:`delivery.deliver`, which
runs the effects in their own ack's transaction. A handler's exception that its task's
``discard_on`` lists is acked DISCARD (:mod:`.discarding`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from boson_django import services, taskresults
from boson_django.compat import task_finished
from boson_django.errors import InvalidEnvelope, LeaseRejected
from boson_django.services import AckReply, AckRequest
from boson_django.states import JobState, Outcome
from boson_django.worker import discarding
from boson_django.worker.attempt import Attempt
from boson_django.worker.delivery import finished_signal, log_outcome
from boson_django.worker.outcomes import Finish, error_text

log = logging.getLogger("boson_django.worker")


def complete(batch: Sequence[tuple[Attempt, Finish]], using: str) -> None:
    """Ack every (attempt, finish) of the batch; each attempt ends settled. A database
    error propagates with the batch untouched, for the loop to flush it again."""
    _complete(batch, using)
    for _, finish in batch:
        finish.let_go()


def _complete(batch: Sequence[tuple[Attempt, Finish]], using: str) -> None:
    live = []
    for attempt, finish in batch:
        if attempt.settled:
            log.warning("boson: job %s finished after its lease was lost; outcome %s not stored",
                        attempt.job_id, finish.outcome.value)
        else:
            live.append((attempt, finish))
    if not live:
        return
    live = list(discarding.apply(live, using))  # a failure its task's discard_on lists: DISCARD
    replies = services.ack_many([_request(a, f) for a, f in live], using=using)
    bad = [(a, f, r) for (a, f), r in zip(live, replies) if isinstance(r.error, InvalidEnvelope)]
    if bad:
        retried = services.ack_many(
            [AckRequest(a.lease, Outcome.RETRY, error=error_text(r.error), logs=list(f.logs), actual_weight=a.actual_weight)
             for a, f, r in bad],
            using=using,
        )
        fixed = {id(a): (Finish(Outcome.RETRY, error=error_text(r.error), logs=f.logs), r2)
                 for (a, f, r), r2 in zip(bad, retried)}
        live = [(a, fixed[id(a)][0]) if id(a) in fixed else (a, f) for a, f in live]
        replies = [fixed[id(a)][1] if id(a) in fixed else r for (a, _), r in zip(live, replies)]
    unheard: dict[str, bool] = {}  # backend alias -> task_finished would reach no one (asked once per flush)
    for (attempt, finish), reply in zip(live, replies):
        _settle(attempt, finish, reply, unheard)


def _request(attempt: Attempt, finish: Finish) -> AckRequest:
    return AckRequest(attempt.lease, finish.outcome, error=finish.error, delay_ms=finish.delay_ms,
                      logs=list(finish.logs), actual_weight=attempt.actual_weight, result=finish.result)


def _settle(attempt: Attempt, finish: Finish, reply: AckReply, unheard: dict[str, bool]) -> None:
    attempt.settled = True
    if isinstance(reply.error, LeaseRejected):
        log.warning("boson: job %s finished but its lease was lost; outcome %s not stored (%s)",
                    attempt.job_id, finish.outcome.value, reply.error)
        return
    if reply.error is not None:  # InvalidEnvelope even for the RETRY: cannot happen, but say so
        log.error("boson: job %s: ack refused: %s", attempt.job_id, reply.error)
        return
    log_outcome(attempt, finish, reply.state)
    _signal(attempt, finish, reply, unheard)


def _signal(attempt: Attempt, finish: Finish, reply: AckReply, unheard: dict[str, bool]) -> None:
    """``task_finished``: built in memory for a first-run job acked completed, else from the
    store; not at all for a job whose start no one heard of either (see ``executor._started``)
    when no one would hear of its end (``unheard``: the answers of this flush so far)."""
    first_completed = attempt.unit.first_run and reply.state == JobState.COMPLETED.value
    unbuilt = attempt.unbuilt_result_for
    if first_completed and unbuilt is not None:
        quiet = unheard.get(unbuilt)
        if quiet is None:
            quiet = unheard[unbuilt] = taskresults.unheard(task_finished, unbuilt)
        if quiet:
            return
    started = attempt.started()
    if started is None:
        return
    if not first_completed:
        finished_signal(attempt, finish, reply.at)
        return
    try:
        result = taskresults.completed_result(started, reply.at, finish.result)
        taskresults.send(task_finished, result)
    except Exception:  # noqa: BLE001 -- a receiver's bug must not stop the worker
        log.exception("boson: a task_finished receiver failed for job %s", attempt.job_id)
