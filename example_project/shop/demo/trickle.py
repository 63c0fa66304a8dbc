"""The live demo's steady trickle of the shop's work, a few jobs a second until Ctrl-C.

``batch(tick)`` is the plan: what to enqueue at tick ``tick`` (one tick a second since
the start), a pure function of the tick, so every run gets the same mix and a test reads
it without waiting. ``Trickle`` enqueues the batches that are due, through Django's
standard ``Task.enqueue``. In every minute there are, roughly:

* 120 order emails, 6 of them to a mistyped address (they fail at once: ``discard_on``),
  and 12 follow-up emails scheduled half a minute ahead;
* 60 partner syncs: some retried (HTTP 503), some rate-limited (HTTP 429), 6 the
  partner never takes (HTTP 500 on every attempt: they fail once their attempts are spent);
* 30 thumbnails of full-size photos, each rendering for about 8 seconds with progress;
* 6 search-index rebuilds (deduplicated while one waits), 3 month-end sales reports (in
  the ``reports`` queue, which the demo pauses at start), 2 supplier feeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from shop import mail

TICK_S = 1.0
#: After a stall (a slow disk, a suspended laptop) only this many missed ticks are made up.
MAX_CATCH_UP = 5
#: Full-size product photos: 512 ms + 1 s + 2 s + 4 s of rendering, progress after each.
BIG_SIZES = [512, 1024, 2048, 4096]
FOLLOW_UP_S = 30
FIRST_ORDER = 2000
FIRST_PARTNER_ORDER = 100
FIRST_IMAGE = 100


@dataclass(frozen=True)
class Call:
    """One job to enqueue: a task of ``shop.tasks`` by name, its arguments, and how many
    seconds from now it may run (0: at once)."""

    task: str
    args: tuple[Any, ...]
    delay_s: int = 0


def batch(tick: int) -> list[Call]:
    """The jobs the trickle enqueues at ``tick`` (0, 1, 2...; one a second)."""
    calls = [_order_email(FIRST_ORDER + 2 * tick + n) for n in range(2)]
    calls.append(Call("sync_partner_order", (FIRST_PARTNER_ORDER + tick,)))
    if tick % 2 == 0:
        calls.append(Call("make_thumbnail", (FIRST_IMAGE + tick // 2, BIG_SIZES)))
    if tick % 5 == 2:
        order = FIRST_ORDER + 2 * tick
        calls.append(Call("send_order_email", (order, mail.address(order)), delay_s=FOLLOW_UP_S))
    if tick % 10 == 5:
        calls.append(Call("rebuild_search_index", ()))
    if tick % 20 == 10:
        calls.append(Call("build_sales_report", (_month(1 + tick // 20),)))
    if tick % 30 == 15:
        calls.append(Call("import_supplier_feed", (f"daily-{1 + tick // 30}.csv",)))
    return calls


def _order_email(order: int) -> Call:
    return Call("send_order_email", (order, mail.address(order, mistyped=order % 20 == 13)))


def _month(n: int) -> str:
    """The n-th month after January 2030 (whose report the demo's first mix builds)."""
    return f"{2030 + n // 12}-{n % 12 + 1:02d}"


def due(next_tick: int, elapsed_s: float, tick_s: float = TICK_S) -> range:
    """The ticks due ``elapsed_s`` seconds after the start, from ``next_tick`` on; after
    a stall, only the last ``MAX_CATCH_UP`` of them."""
    last = int(elapsed_s // tick_s)
    return range(max(next_tick, last + 1 - MAX_CATCH_UP), last + 1)


class Trickle:
    """Enqueues each due tick's batch once; counts what it enqueued."""

    def __init__(self) -> None:
        self.next_tick = 0
        self.enqueued = 0

    def pour(self, elapsed_s: float) -> int:
        """Enqueue the batches due ``elapsed_s`` seconds after the start; returns how many jobs."""
        poured = 0
        for tick in due(self.next_tick, elapsed_s):
            for call in batch(tick):
                enqueue(call)
                poured += 1
            self.next_tick = tick + 1
        self.enqueued += poured
        return poured


def enqueue(call: Call) -> str:
    """Enqueue ``call`` with ``Task.enqueue``; returns the job's id."""
    from django.utils import timezone

    from shop import tasks

    task = getattr(tasks, call.task)
    if call.delay_s:
        task = task.using(run_after=timezone.now() + timedelta(seconds=call.delay_s))
    return str(task.enqueue(*call.args).id)
