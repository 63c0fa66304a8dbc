"""Pure decisions, no database: backoff, give-up and token-bucket arithmetic."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from boson_django.validation import UNIQUENESS  # noqa: F401 -- kept importable here


def backoff_bound_ms(attempt: int, base_ms: int, cap_ms: int) -> int:
    """``min(cap, base * 2**(attempt-1))`` for the attempt just spent (1-based)."""
    exponent = max(attempt - 1, 0)
    if exponent > 62:
        return cap_ms
    return min(cap_ms, base_ms * (1 << exponent))


def backoff_ms(attempt: int, base_ms: int, cap_ms: int, rng: random.Random | None = None) -> int:
    """Equal jitter within the bound: half fixed, half random, so retries spread out."""
    bound = backoff_bound_ms(attempt, base_ms, cap_ms)
    half = bound // 2
    return half + (rng or random).randint(0, bound - half)


def gives_up(attempt_after: int, max_attempts: int) -> bool:
    """The RETRY that brings ``attempt`` to ``max_attempts`` fails the job."""
    return attempt_after >= max_attempts


def quarantines(crash_attempt_after: int, crash_limit: int) -> bool:
    """The reclaim that brings ``crash_attempt`` to the crash limit quarantines."""
    return crash_attempt_after >= crash_limit


@dataclass
class BucketState:
    limit: int
    window_ms: int
    burst: int
    tokens: float
    refilled_at: datetime

    @property
    def capacity(self) -> int:
        return self.burst or self.limit

    def refill(self, now: datetime, *, spent: float = 0.0) -> None:
        """Add the tokens earned since ``refilled_at`` at ``limit`` per ``window_ms``, up to
        the capacity less ``spent``: tokens taken by a decision made at ``refilled_at``
        that is moved to the later ``now`` (:meth:`Buckets.catch_up`). Refilled up to the
        whole capacity instead, the next taker at ``now`` would earn again the tokens those
        takes used: twice the capacity at one instant."""
        elapsed_ms = (now - self.refilled_at).total_seconds() * 1000
        if elapsed_ms > 0 and self.window_ms > 0:
            earned = elapsed_ms * self.limit / self.window_ms
            self.tokens = min(float(self.capacity) - spent, self.tokens + earned)
        if now > self.refilled_at:
            self.refilled_at = now

    def try_take(self, weight: float) -> bool:
        """Take ``weight`` tokens if the bucket holds them. A weight over the capacity,
        which the bucket can never hold, is taken once the bucket is full, leaving it in
        debt (below zero) that refills at ``limit`` per ``window_ms``: the job runs, the
        class keeps its rate, and the jobs behind it are not held back for ever."""
        if weight <= self.tokens + 1e-9 or (weight > self.capacity and self.tokens >= self.capacity - 1e-9):
            self.tokens -= weight
            return True
        return False

    def ms_until(self, weight: float) -> int:
        """How long until ``weight`` tokens are there, or the bucket is full for a weight
        over its capacity (for a RATE_LIMITED delay hint)."""
        missing = min(weight, float(self.capacity)) - self.tokens
        if missing <= 0 or self.limit <= 0:
            return 0
        return int(missing * self.window_ms / self.limit) + 1



def unique_key_under(uniqueness: str | None, key: str | None, fingerprint: str) -> str | None:
    """A job's unique key under its TaskConfig's ``uniqueness``: the operator's switch
    beats the key the code gave (a key function that merges calls it should not, say)."""
    if uniqueness == "off":
        return None
    if uniqueness == "arguments" and key is None:
        return f"fingerprint:{fingerprint}"
    return key


#: ``json.dumps`` with these options, built once (it builds an encoder per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def fingerprint(task: str, args: Any, kwargs: Any) -> str:
    """A stable hash of task and arguments: same call, same fingerprint."""
    canonical = _CANONICAL.encode([task, args, kwargs])
    return hashlib.sha256(canonical.encode()).hexdigest()[:40]
