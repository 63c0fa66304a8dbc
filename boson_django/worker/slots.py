"""The worker's slots: the attempts it holds, from their admission until their ack lands.

An attempt keeps its slot until its ack commits (or its lease is lost or released): a
job started in the slot of one whose ack is in flight could kill the process (a poison
job) before that ack commits, and the finished job would be reclaimed as a crash. A
worker that *borrows* may claim into such slots while the acks are in flight; the jobs
so claimed wait in :attr:`Slots.gated` and start only once those acks have landed.

``running``, ``timed`` and ``gated`` are read and written on the loop's thread only.
:attr:`Slots.lock` is held by whoever marks attempts ``acking`` (the acker's take) and
by a lease renewal from its choice of leases to the end of its statement: a renewal
never names a lease a flush holds, and the two never lock rows in different orders.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from boson_django.services.types import LeaseRef
from boson_django.worker.attempt import Attempt
from boson_django.worker.heartbeat import Heartbeat


class Slots:
    def __init__(self, concurrency: int, heartbeat: Heartbeat, *, borrows: bool):
        self.concurrency = concurrency
        self.heartbeat = heartbeat
        #: Claims into the slots of finished attempts whose acks have not committed yet.
        self.borrows = borrows
        self.running: dict[LeaseRef, Attempt] = {}
        #: The running attempts whose job has a ``timeout_ms`` (the only ones a tick checks).
        self.timed: dict[LeaseRef, Attempt] = {}
        #: Admitted into borrowed slots: each waits, with the attempts whose slots it
        #: took, for their acks to land before it starts.
        self.gated: deque[tuple[Attempt, tuple[Attempt, ...]]] = deque()
        #: The loop sleeps with no slot free: the next handler to return wakes it.
        self.awaited = False
        self.lock = threading.Lock()

    def hold(self, attempt: Attempt) -> None:
        self.running[attempt.lease] = attempt
        self.heartbeat.hold(attempt)
        if attempt.unit.envelope.timeout_ms:
            self.timed[attempt.lease] = attempt

    def let_go(self, attempt: Attempt) -> None:
        """Free the attempt's slot. Also drops its future: the future's done-callback
        names the attempt, a reference cycle only the garbage collector could free,
        taking every object of the job with it."""
        del self.running[attempt.lease]
        self.heartbeat.drop(attempt)
        self.timed.pop(attempt.lease, None)
        attempt.future = None

    def held(self) -> list[Attempt]:
        """Attempts whose lease this worker still holds."""
        return [a for a in self.running.values() if not a.settled]

    def renewable(self) -> list[Attempt]:
        """Held leases not in the flush in flight (its statement holds their rows; a renewal
        locking them in another order could deadlock with it)."""
        return [a for a in self.running.values() if not a.settled and not a.acking]

    def lendable(self) -> list[Attempt]:
        """Finished attempts whose slots can be claimed into while their acks are in
        flight: none in a worker that does not borrow."""
        if not self.borrows:
            return []
        return [attempt for attempt in self.running.values() if finished(attempt)]

    def busy(self) -> int:
        """Slots whose handler has not returned (or not started)."""
        return len(self.running) - len(self.lendable())

    def lease_left_s(self) -> float | None:
        """The least time left on a lease held, by this process's clock (None: none held)."""
        now = time.monotonic()
        return min((a.lease_left_s(now) for a in self.running.values() if not a.settled and a.lease_ms), default=None)


def finished(attempt: Attempt) -> bool:
    """The attempt's handler has returned."""
    return attempt.future is not None and attempt.future.done()
