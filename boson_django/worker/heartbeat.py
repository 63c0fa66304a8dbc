"""Renew every lease this worker holds, one ``services.renew`` call per beat (one
statement, unless SQLite binds fewer parameters than the leases need).

Leases are grouped by length (``renew`` takes one ``lease_ms``); jobs of one task share
a length, so a beat is usually a single statement however many jobs run. The beat comes
at most every ``BOSON["HEARTBEAT_MS"]`` and at least three times per lease, so one late
beat never loses a lease. A lease the store reports lost (expired, reclaimed, cancelled)
is flagged to its handler, which stops at its next context call.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable

from boson_django import services
from boson_django.worker.attempt import Attempt

log = logging.getLogger("boson_django.worker")


class Heartbeat:
    """Keeps the lease lengths of the attempts the worker holds, counted as they come and
    go, so the loop learns when the next beat is due without walking every attempt on each
    tick (a worker may hold a thousand)."""

    def __init__(self, every_ms: int, using: str):
        self.every_ms = every_ms
        self.using = using
        self.last = time.monotonic()
        self.lengths: Counter[int] = Counter()
        #: When the last beat that renewed every lease held was sent (or the first lease
        #: held since none was): the leases held last that long from it at least.
        self.renewed_mono = self.last

    def hold(self, attempt: Attempt) -> None:
        if lease_ms := attempt.lease_ms:
            if not self.lengths:
                self.renewed_mono = attempt.lease_mono
            self.lengths[lease_ms] += 1

    def drop(self, attempt: Attempt) -> None:
        if lease_ms := attempt.lease_ms:
            self.lengths[lease_ms] -= 1
            if self.lengths[lease_ms] <= 0:
                del self.lengths[lease_ms]

    def interval_s(self) -> float:
        shortest = min(self.lengths, default=None)
        every = self.every_ms if shortest is None else min(self.every_ms, shortest / 3)
        return max(every, 1) / 1000

    def due_now(self) -> None:
        """Make the next tick beat (a lease was revoked: learn which at once). Safe from
        any thread: the loop only reads ``last``."""
        self.last = float("-inf")

    def lease_left_s(self) -> float | None:
        """About the least time left on a lease held, by this process's clock (None: none
        held), from the last full beat and the shortest lease: no walk over the attempts."""
        shortest = min(self.lengths, default=None)
        return None if shortest is None else self.renewed_mono + shortest / 1000 - time.monotonic()

    def reply_within_s(self, cap_s: float | None) -> float | None:
        """How long the store may take to answer the worker's next calls: ``cap_s``
        (``REPLY_TIMEOUT_MS``; None: no cap), and at most half the time left on the
        leases held (at least half a second): a renewal that goes unanswered is tried
        again on a new connection in time."""
        left = self.lease_left_s()
        if left is None:
            return cap_s
        return min(cap_s or float("inf"), max(left / 2, 0.5))

    def seconds_left(self) -> float:
        return max(self.last + self.interval_s() - time.monotonic(), 0.0)

    def maybe_beat(self, renewable: Callable[[], list[Attempt]]) -> list[Attempt]:
        """Renew if a beat is due; returns the attempts found lost (already flagged)."""
        if not self.lengths or self.seconds_left() > 0:
            return []
        held = renewable()
        return self.beat(held) if held else []

    def beat(self, held: list[Attempt]) -> list[Attempt]:
        self.last = time.monotonic()
        groups: dict[int, list[Attempt]] = defaultdict(list)
        for attempt in held:
            groups[attempt.lease_ms].append(attempt)
        lost: list[Attempt] = []
        first = time.monotonic()
        for lease_ms, group in groups.items():
            sent = time.monotonic()
            gone = Counter(services.renew([a.lease for a in group], lease_ms, using=self.using))
            for attempt in group:
                attempt.lease_mono = sent  # the lost ones are settled: their time no longer counts
            lost += [a for job_id, times in gone.items() for a in _oldest(group, job_id, times)]
        self.renewed_mono = first
        for attempt in lost:
            log.warning("boson: lease of job %s was lost (expired, reclaimed or cancelled); asking its handler to stop",
                        attempt.job_id)
            attempt.lost("its lease was lost (expired, reclaimed or cancelled)")
        return lost


def _oldest(group: list[Attempt], job_id: str, times: int) -> list[Attempt]:
    """The ``times`` attempts of ``job_id`` with the lowest fences. ``renew`` names a lost
    lease by its job: a worker may hold two claims of one job (cancelled while it ran,
    retried, claimed again before its beat learnt the first was lost), and an older fence
    is the stale one."""
    return sorted((a for a in group if a.job_id == job_id), key=lambda a: a.lease.fence)[:times]
