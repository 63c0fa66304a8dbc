"""Turn the failures a task's ``discard_on`` lists into DISCARD, just before their ack.

A handler's exception is a RETRY (:func:`outcomes.failure`); here, on the connection
that acks it, each such attempt is checked against its task's ``discard_on``
(:func:`boson_django.discards.for_task`). The TaskConfig rows of the failing tasks are
read in one query per flush that holds a failure -- none for a flush without one -- so
an operator's edit applies at the next failure, to jobs already queued too. A retry the
handler asked for (``context.retry()``), a timeout and a lost lease are never
discarded: they carry no exception of the handler's.
"""

from __future__ import annotations

from collections.abc import Sequence

from boson_django import discards
from boson_django.models import TaskConfig
from boson_django import database
from boson_django.states import Outcome
from boson_django.worker.attempt import Attempt
from boson_django.worker.outcomes import Finish

Batch = Sequence[tuple[Attempt, Finish]]


def apply(batch: Batch, using: str) -> Batch:
    """``batch`` with each failure whose exception its task's ``discard_on`` lists made
    DISCARD (same error, logs and exception); ``batch`` itself when it holds no failure.
    A database error propagates (the caller's flush is retried whole)."""
    failing = {attempt.unit.envelope.task for attempt, finish in batch
               if finish.exception is not None and finish.outcome is Outcome.RETRY}  # inline: once per job
    if not failing:
        return batch
    configured = _configured(failing, using)
    return [
        (attempt, discarded(finish, discards.for_task(attempt.unit.envelope.task,
                                                      configured.get(attempt.unit.envelope.task))))
        if _may_discard(finish) else (attempt, finish)
        for attempt, finish in batch
    ]


def discarded(finish: Finish, classes: discards.Classes) -> Finish:
    """DISCARD in place of a RETRY whose exception is an instance of one of ``classes``."""
    if not classes or not isinstance(finish.exception, classes):
        return finish
    return Finish(Outcome.DISCARD, error=finish.error, logs=finish.logs, exception=finish.exception)


def _may_discard(finish: Finish) -> bool:
    return finish.outcome is Outcome.RETRY and finish.exception is not None


def _configured(tasks: set[str], using: str) -> dict[str, str]:
    """Each task's TaskConfig ``discard_on``, for the tasks whose row sets one."""
    rows = TaskConfig.objects.using(using).filter(discard_on__isnull=False)
    found: dict[str, str] = {}
    for part in database.in_slices(sorted(tasks), database.most_listed(database.conn(using))):
        found.update(rows.filter(task__in=part).values_list("task", "discard_on"))
    return found
