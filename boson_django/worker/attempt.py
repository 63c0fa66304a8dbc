"""One admitted job while this worker holds it: the state the runtime, the heartbeat and
the handler's context share.

The runtime owns the lifecycle; the handler only ever sees it through its context. An
interruption (lease lost, timeout, shutdown release) is recorded here and surfaces in
the handler at its next context call -- Python cannot stop a thread from outside, so
stopping is cooperative.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from boson_django import taskresults
from boson_django.services import AdmissionUnit, LeaseRef
from boson_django.worker.futures import JobFuture
from boson_django.worker.outcomes import Finish, JobInterrupted, timed_out


@dataclass(eq=False)
class Attempt:
    unit: AdmissionUnit
    worker_id: str
    using: str
    future: Future[Finish] | JobFuture | None = None
    #: The exception the handler gets at its next context call once it must stop.
    interruption: BaseException | None = None
    #: True once the store no longer lets this worker write (acked, lost, released).
    settled: bool = False
    #: The handler has finished and its ack is being flushed (see ``worker.acker``).
    acking: bool = False
    started_result: Any = None
    #: The backend alias of a RUNNING TaskResult not built when the handler started,
    #: because no one would have received it (``taskresults.unheard``): :meth:`started`
    #: builds it if it is needed after all.
    unbuilt_result_for: str | None = None
    #: The handler's log lines so far (read when a timeout acks before it returns).
    logs: Any = None
    #: Callables the handler asked to run inside the transaction of its SUCCESS ack
    #: (``context.in_ack``): their writes commit if and only if the ack does.
    effects: list[Callable[[], Any]] = field(default_factory=list)
    #: This process's monotonic clock when the attempt was made, right after its
    #: admission: a captured log line's store time is ``admitted_at`` plus the time since.
    admitted_mono: float = field(default_factory=time.monotonic)
    #: This process's monotonic clock when the lease was last set, at the latest: just
    #: before the claim, or the last renewal, was sent. The lease lasts ``lease_ms`` from
    #: then at least -- what a worker that cannot ask the store's clock goes by.
    lease_mono: float = field(default_factory=time.monotonic)
    #: What the attempt really cost its rate class (``context.report_weight``): the ack
    #: corrects the admission's charge with it. None: the estimate was exact.
    actual_weight: float | None = None

    @property
    def lease(self) -> LeaseRef:
        return self.unit.lease

    @property
    def job_id(self) -> str:
        return self.unit.lease.job_id

    @property
    def lease_ms(self) -> int:
        return int(self.unit.envelope.lease_ms or 0)

    def lease_left_s(self, now_mono: float) -> float:
        """Seconds left on the lease at least, by this process's monotonic clock."""
        return self.lease_mono + self.lease_ms / 1000 - now_mono

    @property
    def admitted_at(self) -> datetime:
        """Store time of the admission (the lease was set to admission + lease_ms)."""
        return self.unit.lease_expires_at - timedelta(milliseconds=self.lease_ms)

    @property
    def deadline(self) -> datetime | None:
        """Store time by which the handler must finish, from the job's ``timeout_ms``."""
        timeout = self.unit.envelope.timeout_ms
        return None if not timeout else self.admitted_at + timedelta(milliseconds=timeout)

    @property
    def timeout_ms(self) -> int:
        return int(self.unit.envelope.timeout_ms or 0)

    def overran(self, now: datetime) -> bool:
        """Past its deadline on the store clock: the worker acks it as a timeout and
        refuses what the handler returns after."""
        deadline = self.deadline
        return deadline is not None and now >= deadline

    def timeout_finish(self, logs: list[str]) -> Finish:
        """What the store records for an attempt that overran: a RETRY with ``TaskTimeout``."""
        return timed_out(self.timeout_ms).with_logs(logs)

    def started(self) -> Any:
        """The job's RUNNING TaskResult (None: undecodable, there is no Task to report on)."""
        if self.unbuilt_result_for is not None:
            self.started_result = taskresults.running_result(self.unit, self.worker_id, self.unbuilt_result_for)
            self.unbuilt_result_for = None
        return self.started_result

    def interrupt(self, exc: BaseException) -> None:
        """Ask the handler to stop: it sees ``exc`` at its next context call. An async
        handler is also cancelled at its next ``await``."""
        if self.interruption is None:
            self.interruption = exc
        cancel = getattr(self.future, "boson_cancel", None)  # an async handler's task
        if cancel is not None:
            cancel()

    def check(self) -> None:
        """Raise the pending interruption, if any (called by every context method)."""
        if self.interruption is not None:
            raise self.interruption

    def lost(self, why: str) -> None:
        self.settled = True
        self.interrupt(JobInterrupted(f"job {self.job_id}: {why}; stop now, later writes are refused"))
