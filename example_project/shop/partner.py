"""A simulated partner API, deterministic so that the demo's outcome can be checked.

* orders with ``order_id % 10 == 9`` are ones the partner cannot take: HTTP 500 on
  every attempt, until the job has spent them all and fails for good;
* other orders with ``order_id % 4 == 1`` get HTTP 503 on their first two attempts;
* other orders with ``order_id % 4 == 2`` get HTTP 429 (Retry-After 1.5 s) the first time;
* every other call succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass

RETRY_AFTER_MS = 1_500


class PartnerUnavailable(Exception):
    """The partner answered 5xx; worth retrying later."""


@dataclass(frozen=True)
class Reply:
    status: int
    retry_after_ms: int = 0


def push_order(order_id: int, *, attempt: int, throttled_before: bool) -> Reply:
    kind = kind_of(order_id)
    if kind == "down":
        return Reply(500)
    if kind == "flaky" and attempt <= 2:
        return Reply(503)
    if kind == "throttled" and not throttled_before:
        return Reply(429, RETRY_AFTER_MS)
    return Reply(200)


def kind_of(order_id: int) -> str:
    """What the demo expects for this order: ``down``, ``flaky``, ``throttled`` or ``ok``."""
    if order_id % 10 == 9:
        return "down"
    return {1: "flaky", 2: "throttled"}.get(order_id % 4, "ok")
