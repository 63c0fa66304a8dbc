"""The context a ``takes_context=True`` handler receives: Django's ``TaskContext`` plus
boson's extras.

Every extra goes through the services under the job's lease, so a handler that lost its
lease (reclaimed, cancelled, released at shutdown, timed out) learns it at its next call
here as an exception, and nothing it writes afterwards is stored. The outcome helpers
(``snooze``, ``skip``, ``discard``, ``retry``, ``rate_limited``) end the handler by raising a
:class:`~boson_django.worker.outcomes.Control` exception that the executor turns into
that outcome; they are not errors and are not recorded as such (a ``retry`` is recorded
as the retry it asks for, its reason as the error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from asgiref.sync import sync_to_async

from boson_django import services, validation
from boson_django.compat import TaskContext
from boson_django.errors import LeaseRejected
from boson_django.services import JobOutput, JobProgress
from boson_django.worker.attempt import Attempt
from boson_django.worker.outcomes import Discard, JobInterrupted, RateLimited, Retry, Skip, Snooze


class BosonContext(TaskContext):  # type: ignore[misc,valid-type,unused-ignore]
    """``context.attempt`` is the 1-based number of this attempt (crashes do not count)."""

    _attempt: Attempt
    _checkpoint: Any

    def __init__(self, task_result: Any, attempt: Attempt):
        super().__init__(task_result=task_result)
        # object.__setattr__: the frozen (and, in the backport, slotted) parent's own
        # __setattr__ refuses or breaks on subclass attributes.
        object.__setattr__(self, "_attempt", attempt)
        object.__setattr__(self, "_checkpoint", attempt.unit.checkpoint)

    @property
    def attempt(self) -> int:  # type: ignore[override]
        return self._attempt.unit.attempt + 1

    @property
    def job_id(self) -> str:
        return self._attempt.job_id

    @property
    def fence(self) -> int:
        """The fence of this attempt's lease (it grows on every claim of the job)."""
        return self._attempt.lease.fence

    @property
    def crash_attempt(self) -> int:
        """How many times a worker died holding this job before this attempt."""
        return self._attempt.unit.crash_attempt

    @property
    def last_checkpoint(self) -> Any:
        """The newest checkpoint: this attempt's, else the one a previous attempt left."""
        return self._checkpoint

    @property
    def should_stop(self) -> bool:
        """True once the handler must stop (for loops that make no other context call)."""
        return self._attempt.interruption is not None

    def checkpoint(self, data: Any) -> None:
        """Persist step state before the next step; the next attempt starts from it."""
        self._fenced(services.checkpoint, data)
        object.__setattr__(self, "_checkpoint", data)

    def progress(self, current: float, total: float | None = None, message: str = "") -> JobProgress:
        result: JobProgress = self._fenced(services.write_progress, current, total, message)
        return result

    def output(self, data: Any) -> JobOutput:
        result: JobOutput = self._fenced(services.write_output, data)
        return result

    async def acheckpoint(self, data: Any) -> None:
        await sync_to_async(self.checkpoint)(data)

    async def aprogress(self, current: float, total: float | None = None, message: str = "") -> JobProgress:
        return await sync_to_async(self.progress)(current, total, message)

    async def aoutput(self, data: Any) -> JobOutput:
        return await sync_to_async(self.output)(data)

    def in_ack(self, effect: Callable[[], Any]) -> None:
        """Run ``effect()`` inside the transaction that acks this attempt as SUCCESS.

        Its writes (on the store's database) commit if and only if the fenced ack does:
        a worker that dies, loses its lease or loses its connection before the commit
        leaves nothing, and the next attempt registers the effect again -- so the effect
        is committed exactly once per job. Any other outcome drops the registered
        effects; an effect that raises makes the attempt a failure (RETRY).
        """
        if not callable(effect):
            raise TypeError(f"in_ack() needs a callable, got {type(effect).__name__}")
        self._attempt.check()
        self._attempt.effects.append(effect)

    def report_weight(self, actual: float) -> None:
        """What this attempt really cost its rate class, when the job's ``weight`` was an
        estimate (a batch that sent fewer mails, say): its ack, whatever the outcome,
        corrects the bucket's charge to ``actual`` (``0`` refunds it all). The last call
        wins."""
        weight = validation.amount(actual, "actual_weight")
        self._attempt.check()
        self._attempt.actual_weight = weight

    def snooze(self, delay_ms: int) -> NoReturn:
        """Run again after ``delay_ms`` (> 0); spends no attempt."""
        raise Snooze(validation.delay(delay_ms, required_positive=True))

    def retry(self, delay_ms: int | None = None, reason: str = "") -> NoReturn:
        """Fail this attempt and run again after ``delay_ms`` (None: the capped
        exponential backoff); spends an attempt, as an exception would."""
        raise Retry(validation.delay(delay_ms), reason=reason)

    def rate_limited(self, delay_ms: int | None = None) -> NoReturn:
        """Back off after an outside rate limit; ``None`` waits for the job's bucket."""
        raise RateLimited(validation.delay(delay_ms))

    def skip(self, reason: str = "") -> NoReturn:
        """Nothing to do; the job ends ``skipped``."""
        raise Skip(reason=reason)

    def discard(self, reason: str = "") -> NoReturn:
        """Fail now, without retrying."""
        raise Discard(reason=reason)

    def _fenced(self, write: Any, *args: Any) -> Any:
        self._attempt.check()
        try:
            return write(self._attempt.lease, *args, using=self._attempt.using)
        except LeaseRejected as exc:
            self._attempt.lost(f"the store refused a write ({exc})")
            raise JobInterrupted(str(exc)) from exc
