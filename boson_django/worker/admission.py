"""Admission: claim as many jobs as there are free slots, and start them.

Admission asks only for as many jobs as there are free slots, so a worker never holds
a lease it cannot start. A worker that borrows (:mod:`.slots`) may claim into the slots
of finished attempts whose acks are in flight; each job so claimed waits in
``Slots.gated`` until the acks of every attempt finished at the time of its claim have
landed. A started attempt's handler hands it to the acker when it returns.
"""

from __future__ import annotations

import functools
import time

from boson_django import services
from boson_django.worker.acker import Acker
from boson_django.worker.attempt import Attempt
from boson_django.worker.executor import Executor, Known
from boson_django.worker.slots import Slots
from boson_django.worker.sweeper import Sweeper


def admission_batch(concurrency: int) -> int:
    """The most jobs one claim asks for: a quarter of the slots, between 64 and 256, and
    every slot of a worker with fewer than 64. A claim's time grows with its batch, and
    a slot comes back only when its ack lands: batches this size keep a claim and a
    flush in flight together instead of two large batches waiting on each other
    (docs/performance.md)."""
    return min(concurrency, max(64, min(256, concurrency // 4)))


class Admission:
    def __init__(self, worker_id: str, queues: list[str], slots: Slots, acker: Acker, sweeper: Sweeper, *,
                 using: str, max_jobs: int | None, burst: bool):
        self.worker_id, self.queues, self.using = worker_id, queues, using
        self.slots, self.acker, self.sweeper = slots, acker, sweeper
        self.max_jobs, self.burst = max_jobs, burst
        self.batch = admission_batch(slots.concurrency)
        #: Jobs claimed so far.
        self.admitted = 0
        self.executor: Executor | None = None

    def start(self) -> None:
        self.executor = Executor(self.slots.concurrency, "boson")

    def shutdown(self) -> None:
        if self.executor is not None:
            self.executor.shutdown()

    def admit(self) -> tuple[int, int]:
        """Claim into the free slots (at most :attr:`batch`); returns how many jobs were
        asked for and how many were claimed. Jobs claimed into vacant slots start now,
        those claimed into borrowed ones are gated."""
        slots = self.slots
        lendable = slots.lendable()
        vacant = max(slots.concurrency - len(slots.running), 0)
        free = min(slots.concurrency - len(slots.running) + len(lendable), self.batch)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.admitted)
        if free <= 0:
            return 0, 0
        gate = tuple(lendable) if free > vacant else ()
        asked_at = time.monotonic()
        units = services.admit(self.worker_id, self.queues, free, using=self.using)
        known: Known = {}
        for unit in units:
            attempt = Attempt(unit, self.worker_id, self.using, lease_mono=asked_at)
            slots.hold(attempt)
            if vacant:
                vacant -= 1
                self._submit(attempt, known)
            else:
                slots.gated.append((attempt, gate))
        self.admitted += len(units)
        return free, len(units)

    def _submit(self, attempt: Attempt, known: Known) -> None:
        self.executor.submit(attempt, functools.partial(self.acker.finished_one, attempt), known)  # type: ignore[union-attr]

    def start_cleared(self) -> None:
        """Start the gated attempts whose slots' acks have landed (in the order claimed);
        one whose lease was lost meanwhile never starts."""
        slots = self.slots
        known: Known = {}
        cleared: tuple[Attempt, ...] | None = None  # the jobs of one claim share their gate
        while slots.gated:
            attempt, gate = slots.gated[0]
            if gate is not cleared:
                if any(slots.running.get(taken.lease) is taken for taken in gate):
                    return
                cleared = gate
            slots.gated.popleft()
            if attempt.settled:
                slots.let_go(attempt)
            else:
                self._submit(attempt, known)

    def idle_exit(self, got: int) -> bool:
        """Whether the worker is done: nothing held (a handler that overran its timeout
        keeps its daemon thread after its ack, and does not count) and nothing claimed,
        and ``max_jobs`` reached or, in burst mode, one last sweep made nothing due."""
        if self.slots.held() or got:
            return False
        if self.max_jobs is not None and self.admitted >= self.max_jobs:
            return True
        if not self.burst:
            return False
        done = self.sweeper.run()
        return not (done.get("boson.promote") or done.get("boson.reclaim"))
