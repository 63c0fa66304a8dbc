"""What a handler run produced, and the small exceptions a handler uses to choose it.

The executor turns every way a handler can end into a :class:`Finish` (pure data: an
:class:`~boson_django.states.Outcome` plus what the ack needs); the runtime hands it to
``services.ack``. A handler asks for a non-default outcome by raising one of the
:class:`Control` exceptions below -- usually through its context
(``context.snooze(5000)``) -- so a snooze or skip is never mistaken for a failure.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

from boson_django import validation
from boson_django.errors import InvalidEnvelope, StoreError
from boson_django.states import Outcome
from boson_django.worker.logcapture import MAX_LINE_CHARS


@dataclass(frozen=True)
class Finish:
    """How one attempt ended: the ack's arguments, decided without touching the store."""

    outcome: Outcome
    error: str | None = None
    delay_ms: int | None = None
    result: Any = None
    logs: tuple[str, ...] = ()
    #: The handler's exception, for ``task_finished`` (sent while it is being handled).
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    def with_logs(self, logs: list[str]) -> Finish:
        if not logs and not self.logs:
            return self  # most attempts log nothing: no second Finish per job
        return Finish(self.outcome, self.error, self.delay_ms, self.result, tuple(logs), self.exception)

    def let_go(self) -> None:
        """Once the outcome is settled (``task_finished`` sent, or not: a refused ack, a
        lost lease): drop the traceback of the handler's exception. It holds the handler's
        frames, and one of them this Finish, a cycle only the collector would free."""
        if self.exception is not None:
            self.exception.__traceback__ = None


class Control(Exception):
    """Base of the exceptions that end a handler with a chosen outcome (not an error)."""

    outcome: Outcome = Outcome.RETRY
    #: Recorded when the handler gives no reason, after the class's path (as an error's
    #: first line reads); None records the reason alone, or nothing.
    unexplained: str | None = None

    def __init__(self, delay_ms: int | None = None, reason: str = ""):
        super().__init__(reason or self.__class__.__name__)
        self.delay_ms = delay_ms
        self.reason = reason

    def finish(self) -> Finish:
        if self.unexplained is None:
            return Finish(self.outcome, error=self.reason or None, delay_ms=self.delay_ms)
        error = f"{_path(type(self))}: {self.reason or self.unexplained}"
        return Finish(self.outcome, error=error, delay_ms=self.delay_ms)


class Snooze(Control):
    """Run again after ``delay_ms``; spends no attempt and records nothing."""

    outcome = Outcome.SNOOZE


class Skip(Control):
    """Nothing to do: the job ends ``skipped`` (Django shows SUCCESSFUL)."""

    outcome = Outcome.SKIP


class Discard(Control):
    """Give up now without retrying: the job ends ``failed`` with ``reason``."""

    outcome = Outcome.DISCARD
    unexplained = "discarded by the handler"


class Retry(Control):
    """Fail this attempt on purpose: run again after ``delay_ms`` (None: the backoff),
    spending an attempt; the one that reaches ``max_attempts`` fails the job."""

    outcome = Outcome.RETRY
    unexplained = "retry asked by the handler"


class RateLimited(Control):
    """An outside rate limit was hit: back to ``scheduled`` after ``delay_ms`` (or when
    the job's bucket refills), spending no attempt."""

    outcome = Outcome.RATE_LIMITED


class JobInterrupted(StoreError):
    """Raised inside a handler at its next context call once it must stop: its lease was
    lost (reclaimed, cancelled) or the worker is shutting down and released it."""


class TaskTimeout(TimeoutError):
    """The handler overran the job's ``timeout_ms``; the attempt was acked RETRY."""


class TransactionLeftOpen(RuntimeError):
    """The handler returned inside a transaction it never closed (``transaction.atomic``
    entered and not exited): its writes were rolled back, so the attempt failed."""


class UndecodableJob(StoreError):
    """A row names no registered task, or its arguments cannot be passed to it."""


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def error_text(exc: BaseException) -> str:
    """``dotted.ExceptionClass: message`` then the traceback (see taskresults.task_error)."""
    message = validation.clipped(_message(exc).replace("\n", " "), MAX_LINE_CHARS)  # a line, as a log line
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{_path(type(exc))}: {message}\n{tb}"


def _message(exc: BaseException) -> str:
    """``str(exc)``, unless the exception's own ``__str__`` raises: the error must still
    name the handler's exception, not one raised while describing it (the traceback
    module says the same)."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 -- any error of a user's __str__
        return "<exception str() failed>"


def failure(exc: BaseException) -> Finish:
    """An exception from the handler: RETRY with backoff (the services decide give-up)."""
    return Finish(Outcome.RETRY, error=error_text(exc), exception=exc)


def unstorable(exc: BaseException) -> Finish:
    """A return value the store cannot hold (not JSON, NaN, a NUL character, over
    ``MAX_RESULT_BYTES``): the job fails now (DISCARD). A retry would run the task's work
    again only to return the same value."""
    return Finish(Outcome.DISCARD, error=error_text(exc), exception=exc)


def refused_result(exc: InvalidEnvelope) -> InvalidEnvelope:
    """The ack's refusal of ``result`` (``services.ack``'s name for it), said of the
    handler's ``return value``, with the traceback of the refusal."""
    return InvalidEnvelope("return value", exc.reason, at=exc.at).with_traceback(exc.__traceback__)


def timed_out(timeout_ms: int) -> Finish:
    return Finish(Outcome.RETRY, error=f"{_path(TaskTimeout)}: handler overran timeout_ms={timeout_ms}")


def undecodable(why: str) -> Finish:
    return Finish(Outcome.UNDECODABLE, error=f"{_path(UndecodableJob)}: {why}")
