"""The sweeps (promote due jobs, reclaim expired leases, evict finished jobs, prune old
throughput counters, tick due schedules) inside workers, each under a duty lease so that
one node runs it per tick however many workers share the database.

A duty's lease is a few sweep intervals long: its holder keeps extending it, and if the
holder dies another worker takes over once it lapses on the store clock.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from boson_django import conf, services
from boson_django.schedules.scheduler import DUTY as SCHEDULE_DUTY, run_due as run_schedules
from boson_django.services.throughput import prune_throughput

log = logging.getLogger("boson_django.worker")

def _prune_counters(limit: int, *, using: str) -> int:
    """Throughput counters older than two days go; ``limit`` does not apply (rows are few)."""
    return prune_throughput(using=using)


DUTIES: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("boson.promote", services.promote_due),
    ("boson.reclaim", services.reclaim_expired),
    ("boson.evict", services.evict_retained),
    ("boson.prune", _prune_counters),
    (SCHEDULE_DUTY, run_schedules),
)
#: A sweep that filled its batch runs again at once, up to this many rounds per tick.
MAX_ROUNDS = 5


def _count(done: Any) -> int:
    return len(done) if isinstance(done, list) else int(done)


class Sweeper:
    def __init__(self, holder: str, using: str, interval_ms: int, batch: int,
                 on_work: Callable[[], None] | None = None):
        self.holder = holder
        self.using = using
        self.interval_ms = interval_ms
        self.batch = batch
        self.on_work = on_work
        self.last = float("-inf")

    @property
    def duty_lease_ms(self) -> int:
        return conf.duty_lease_ms(self.interval_ms)

    def seconds_left(self) -> float:
        return max(self.last + self.interval_ms / 1000 - time.monotonic(), 0.0)

    def maybe_run(self) -> dict[str, int | None]:
        return self.run() if self.seconds_left() <= 0 else {}

    def run(self) -> dict[str, int | None]:
        """One tick: each sweep this holder can claim; ``None`` marks a duty held elsewhere."""
        self.last = time.monotonic()
        done: dict[str, int | None] = {}
        for name, sweep in DUTIES:
            if not services.claim_duty(name, self.holder, self.duty_lease_ms, using=self.using):
                done[name] = None
                continue
            if name == SCHEDULE_DUTY:  # each slot it fires records who fired it
                sweep = functools.partial(sweep, holder=self.holder)
            done[name] = self._rounds(sweep)
        if self.on_work and (done.get("boson.promote") or done.get("boson.reclaim")):
            self.on_work()
        return done

    def _rounds(self, sweep: Callable[..., Any]) -> int:
        total = 0
        for _ in range(MAX_ROUNDS):
            n = _count(sweep(self.batch, using=self.using))
            total += n
            if n < self.batch:
                break
        return total

    def release(self) -> None:
        """Hand the duties back at once so another worker need not wait for them to lapse."""
        for name, _ in DUTIES:
            try:
                services.release_duty(name, self.holder, using=self.using)
            except Exception:  # noqa: BLE001 -- best effort on the way out
                log.warning("boson: could not release duty %s", name, exc_info=True)
