"""While the database is unreachable: how long to wait before the next attempt, and what
to log about it.

The wait doubles from 100 ms up to ``RECONNECT_MAX_MS``, but never past a quarter of the
time left on the shortest lease the worker holds -- reckoned on this process's monotonic
clock from when each lease was last set, since the store's clock cannot be asked -- so an
outage shorter than a lease's time left is noticed to be over with time to renew it. Each
wait is jittered (between half and all of its bound): workers that lost the database
together do not come back in lockstep.

Logging: one line per failed attempt (its number, the error's class and first line, the
wait), the traceback with the first one only, and one line when the database is back
saying how long it was gone.
"""

from __future__ import annotations

import logging
import random
import time

from boson_django.worker.logtext import one_line

log = logging.getLogger("boson_django.worker")

#: The first wait's bound, and the shortest wait ever taken (a lease about to lapse).
FIRST_WAIT_S = 0.1
SHORTEST_WAIT_S = 0.02


def wait_bound(attempt: int, cap_s: float, lease_left_s: float | None) -> float:
    """The longest wait after failed attempt number ``attempt`` (1 for the first)."""
    bound = min(FIRST_WAIT_S * 2 ** min(attempt - 1, 30), cap_s)
    if lease_left_s is not None:
        bound = min(bound, lease_left_s / 4)
    return max(bound, SHORTEST_WAIT_S)


class Reconnect:
    """One worker's (or one listener's) outages: ``failed`` after each failed attempt,
    ``back`` once an attempt succeeds."""

    def __init__(self, cap_ms: int, what: str = "database", failure: str = "database error",
                 rng: random.Random | None = None, tracebacks: bool = True):
        """``failure`` starts the line of a failed attempt, ``what`` the line saying it is
        back; ``tracebacks`` False logs none at all (one line says enough)."""
        self.cap_s = cap_ms / 1000
        self.what, self.failure = what, failure
        self.rng = rng or random.Random()
        self.attempts = 0
        self.since: float | None = None
        #: A traceback was logged for this outage (or for an error just before it).
        self.traced = not tracebacks
        self._tracebacks = tracebacks

    @property
    def down(self) -> bool:
        """An attempt failed and none has succeeded since."""
        return self.since is not None

    def failed(self, exc: BaseException, lease_left_s: float | None = None) -> float:
        """Count a failed attempt, log it in one line; the wait before the next one."""
        if self.since is None:
            self.since = time.monotonic()
        self.attempts += 1
        wait = wait_bound(self.attempts, self.cap_s, lease_left_s) * self.rng.uniform(0.5, 1.0)
        log.warning("boson: %s; reconnecting in %.2fs (attempt %d: %s)", self.failure, wait, self.attempts,
                    describe(exc), exc_info=self._trace(exc))
        return wait

    def report(self, message: str, exc: BaseException) -> None:
        """Another part of the worker met a database error (``message`` says what it was
        doing): one line, with the traceback unless this outage has had one."""
        log.warning("boson: %s (%s)", message, describe(exc), exc_info=self._trace(exc))

    def settled(self) -> None:
        """A tick went through with no outage: the next error's traceback is logged."""
        if self.since is None:
            self.traced = not self._tracebacks

    def _trace(self, exc: BaseException) -> BaseException | None:
        if self.traced:
            return None
        self.traced = True
        return exc

    def back(self, detail: str = "") -> float:
        """The database answered again: log how long it was gone; that many seconds."""
        if self.since is None:
            return 0.0
        lasted = time.monotonic() - self.since
        log.warning("boson: %s back after %.1fs (%d failed attempts)%s", self.what, lasted, self.attempts,
                    f"; {detail}" if detail else "")
        self.since, self.attempts, self.traced = None, 0, not self._tracebacks
        return lasted


def describe(exc: BaseException) -> str:
    """``Class: first line of the message``, made one printable line."""
    text = str(exc).strip().split("\n", 1)[0]
    return one_line(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
