"""Store the outcomes of finished attempts (``services.ack_many``), then report them.

The only module of the worker that acks. Each ack is fenced on its own: a lease lost
meanwhile is refused and logged while the others apply. An ack the store refuses as
invalid (a return value it cannot hold, a negative snooze delay) or whose in-ack effect
raised is acked again as what the handler's failure stands for
(:func:`instead_of_refused`), in a second statement. A database error propagates with
nothing of the batch written and every attempt unsettled, for the caller to ack it
again. A handler's exception its task's ``discard_on`` lists is acked DISCARD
(:mod:`.discarding`). Once stored, each outcome goes to :mod:`.reporting`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import InterfaceError, OperationalError

from boson_django import database, services
from boson_django.errors import InvalidEnvelope, LeaseRejected, StoreError
from boson_django.services import AckReply, AckRequest
from boson_django.states import Outcome
from boson_django.worker import discarding, reporting
from boson_django.worker.attempt import Attempt
from boson_django.worker.outcomes import Finish, error_text, refused_result, unstorable

log = logging.getLogger("boson_django.worker")

Batch = Sequence[tuple[Attempt, Finish]]


def complete(batch: Batch, using: str) -> None:
    """Ack every (attempt, finish) of ``batch`` in one transaction; each attempt ends
    settled. Attempts with in-ack effects are not acked here (:func:`deliver`). Not
    idempotent: the store refuses a second ack of a lease (logged, dropped)."""
    _complete(batch, using, one=False)
    for _, finish in batch:
        finish.let_go()


def deliver(attempt: Attempt, finish: Finish) -> None:
    """Ack one attempt (``services.ack``), running its in-ack effects
    (``context.in_ack``) in the SUCCESS ack's own transaction: they commit if and only if
    the fenced ack does. An effect that raises rolls the ack back and the attempt is acked
    RETRY with its error; a lost connection propagates like any database error (the retry
    runs them again)."""
    _complete(((attempt, finish),), attempt.using, one=True)
    finish.let_go()


def _complete(batch: Batch, using: str, *, one: bool) -> None:
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
    replies = _store(live, using, one)
    refused = [i for i, reply in enumerate(replies) if isinstance(reply.error, (InvalidEnvelope, _EffectFailed))]
    if refused:
        instead = [(live[i][0], instead_of_refused(replies[i].error, live[i][1])) for i in refused]  # type: ignore[arg-type]
        for i, pair, reply in zip(refused, instead, _store(instead, using, one)):
            live[i], replies[i] = pair, reply
    unheard: dict[str, bool] = {}  # backend alias -> task_finished would reach no one (asked once per flush)
    for (attempt, finish), reply in zip(live, replies):
        attempt.settled = True
        if isinstance(reply.error, LeaseRejected):
            log.warning("boson: job %s finished but its lease was lost; outcome %s not stored (%s)",
                        attempt.job_id, finish.outcome.value, reply.error)
        elif reply.error is not None:  # InvalidEnvelope even for the RETRY: cannot happen, but say so
            log.error("boson: job %s: ack refused: %s", attempt.job_id, reply.error)
        else:
            reporting.report(attempt, finish, reply, unheard)


def _store(live: Batch, using: str, one: bool) -> list[AckReply]:
    if one:
        return [_ack_one(*live[0], using=using)]
    return services.ack_many([_request(a, f) for a, f in live], using=using)


def _request(attempt: Attempt, finish: Finish) -> AckRequest:
    return AckRequest(attempt.lease, finish.outcome, error=finish.error, delay_ms=finish.delay_ms,
                      logs=list(finish.logs), actual_weight=attempt.actual_weight, result=finish.result)


def instead_of_refused(exc: Exception, finish: Finish) -> Finish:
    """What is acked when the ack of ``finish`` was refused: a return value the store
    cannot hold fails the job (DISCARD, see ``outcomes.unstorable``); a bad delay or a
    failing in-ack effect is a handler failure (RETRY)."""
    if isinstance(exc, InvalidEnvelope) and exc.field == "result":
        return unstorable(refused_result(exc)).with_logs(list(finish.logs))
    cause = exc.__cause__ if isinstance(exc, _EffectFailed) and exc.__cause__ else exc
    return Finish(Outcome.RETRY, error=error_text(cause), logs=finish.logs)


class _EffectFailed(StoreError):
    """An in-ack effect raised (not a lost connection): the ack is rolled back."""


def _ack_one(attempt: Attempt, finish: Finish, *, using: str) -> AckReply:
    """``services.ack`` of one attempt -- with its in-ack effects, in one transaction, for
    a SUCCESS -- as a reply (its store time not known). A refusal, or an effect's failure,
    is the reply's error, nothing of the ack stored."""
    try:
        if attempt.effects and finish.outcome is Outcome.SUCCESS:
            state = _acked_with_effects(attempt, finish, using=using)
        else:
            state = services.ack(attempt.lease, finish.outcome, error=finish.error, delay_ms=finish.delay_ms,
                                 logs=list(finish.logs), actual_weight=attempt.actual_weight, result=finish.result,
                                 using=using)
    except (LeaseRejected, InvalidEnvelope, _EffectFailed) as exc:
        return AckReply(attempt.lease, error=exc)
    return AckReply(attempt.lease, state)


@database.store_transaction
def _acked_with_effects(attempt: Attempt, finish: Finish, *, using: str | None = None) -> str | None:
    state = services.ack(attempt.lease, finish.outcome, logs=list(finish.logs), actual_weight=attempt.actual_weight,
                         result=finish.result, using=using)
    for effect in attempt.effects:
        try:
            effect()
        except (OperationalError, InterfaceError):
            raise  # the connection, not the effect: the caller acks it all again
        except Exception as exc:  # noqa: BLE001 -- the handler's effect failed
            raise _EffectFailed(str(exc)) from exc
    return state
