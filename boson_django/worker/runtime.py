"""The worker loop: admit, run, ack, renew, sweep, sleep -- until told to stop.

Each tick is a handful of short transactions on the loop's own connection; no
transaction is ever open while a handler runs (handlers run on other threads and make
their own short ones through their context). The loop sleeps on a
:class:`~boson_django.worker.notify.Waker` that a finished job, a NOTIFY, a signal or
the poll interval sets -- it never spins. A database error closes the connection and
backs off (:mod:`.reconnect`: capped by ``RECONNECT_MAX_MS`` and by the time left on the
leases held); the first tick that reaches the store again renews every lease before
anything else, and a lease that lapsed meanwhile is reclaimed by a sweep, so no job is
ever lost.

:class:`Worker` composes parts with one job each, and only it calls them:
:class:`~.slots.Slots` (what is held), :class:`~.admission.Admission` (claim and start),
:class:`~.acker.Acker` (ack and free the slot), :class:`~.lifecycle.Lifecycle` (start,
drain, shut down). A job's way through them runs one way: admitted into a slot, run on
a handler thread, handed to the acker, acked by the completer, reported, slot freed.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass, field

from django.db import DatabaseError, InterfaceError, connections

from boson_django import clock, conf, database, drivers
from boson_django.services import wakeups
from boson_django.worker.acker import Acker
from boson_django.worker.admission import Admission, admission_batch
from boson_django.worker.attempt import Attempt
from boson_django.worker.completer import deliver
from boson_django.worker.heartbeat import Heartbeat
from boson_django.worker.lifecycle import Lifecycle
from boson_django.worker.notify import Waker
from boson_django.worker.outcomes import TaskTimeout
from boson_django.worker.reconnect import Reconnect
from boson_django.worker.shutdown import Shutdown
from boson_django.worker.slots import Slots, finished
from boson_django.worker.sweeper import Sweeper
from boson_django.worker.watchdog import Watchdog

log = logging.getLogger("boson_django.worker")

__all__ = ["Worker", "WorkerOptions", "admission_batch", "default_worker_id"]


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class WorkerOptions:
    """What ``manage.py boson_worker`` accepts; ``None`` means the ``BOSON`` setting."""

    queues: list[str] = field(default_factory=list)
    concurrency: int | None = None
    burst: bool = False
    max_jobs: int | None = None
    poll_interval_ms: int | None = None
    notify: bool | None = None
    worker_id: str | None = None
    grace_ms: int | None = None
    using: str | None = None
    handle_signals: bool = True


class Worker:
    def __init__(self, options: WorkerOptions | None = None):
        o = options or WorkerOptions()
        s = conf.get()
        self.options = o
        self.using = database.alias(o.using)
        self.worker_id = o.worker_id or default_worker_id()
        self.concurrency = o.concurrency or s.CONCURRENCY
        self.poll_s = (o.poll_interval_ms or s.POLL_INTERVAL_MS) / 1000
        self.waker = Waker()
        self.shutdown = Shutdown(s.SHUTDOWN_GRACE_MS if o.grace_ms is None else o.grace_ms, self.waker.set)
        self.heartbeat = Heartbeat(s.HEARTBEAT_MS, self.using)
        self.sweeper = Sweeper(self.worker_id, self.using, s.SWEEP_INTERVAL_MS, s.SWEEP_BATCH,
                               functools.partial(wakeups.notify_at_commit, [wakeups.ANY_QUEUE], self.using))
        self.reconnect = Reconnect(s.RECONNECT_MAX_MS)
        #: Breaks a connection of the loop or the ack thread whose answer is overdue
        #: (``REPLY_TIMEOUT_MS``, half the time left on the leases, the grace when stopping).
        self.watchdog = Watchdog(stop_at=lambda: self.shutdown.deadline)
        self.reply_s = s.REPLY_TIMEOUT_MS / 1000 or None
        inline = drivers.for_alias(self.using).acks_inline
        #: A small worker admits all its free slots at once, so its claims and its flushes
        #: would take turns: it claims into slots whose acks are in flight. A large one
        #: admits a fraction of its slots at a time and overlaps them already.
        borrows = not inline and admission_batch(self.concurrency) >= self.concurrency
        self.slots = Slots(self.concurrency, self.heartbeat, borrows=borrows)
        self._reply_s = functools.partial(self.heartbeat.reply_within_s, self.reply_s)
        self.acker = Acker(self.using, self.slots, self.waker, inline=inline, watchdog=self.watchdog,
                           reply_s=self._reply_s, reconnect=self.reconnect)
        self.admission = Admission(self.worker_id, o.queues, self.slots, self.acker, self.sweeper, using=self.using,
                                   max_jobs=o.max_jobs, burst=o.burst)
        self.lifecycle = Lifecycle(
            self.worker_id, self.using, queues=o.queues, notify=o.notify, burst=o.burst,
            handle_signals=o.handle_signals, poll_s=self.poll_s, reply_s=self.reply_s, shutdown=self.shutdown,
            waker=self.waker, watchdog=self.watchdog, heartbeat=self.heartbeat, sweeper=self.sweeper,
            reconnect=self.reconnect, slots=self.slots, acker=self.acker, admission=self.admission,
        )
        self._next_deadline_s: float | None = None

    def run(self) -> int:
        """Run until stopped (or, in burst mode, until nothing is due); returns 0."""
        self.lifecycle.start()
        try:
            while not self._step():
                pass
        finally:
            self.lifecycle.finish()
        return 0

    def stop(self, reason: str = "stop()") -> None:
        """Ask the loop to stop gracefully (what SIGTERM does); safe from any thread.
        ``reason`` is logged with the stop."""
        self.shutdown.request(reason)

    @property
    def admitted(self) -> int:
        """Jobs claimed so far."""
        return self.admission.admitted

    def _use_notify(self) -> bool:
        return self.lifecycle.use_notify()

    def _step(self) -> bool:
        """One guarded tick; a database error backs off instead of ending the worker.
        Returns True when the worker is done."""
        try:
            watch = self.lifecycle.watch
            if watch is None:
                done = self._tick()
            else:
                watch.arm(self._reply_s())
                try:
                    done = self._tick()
                finally:
                    watch.disarm()
            if self.reconnect.traced:
                self.reconnect.settled()
            return done
        except (DatabaseError, InterfaceError) as exc:
            wait = self.reconnect.failed(exc, self.slots.lease_left_s())
            database.close_quietly(self.using)
            self._back_off(wait)
            # Past the grace: one more tick on a new connection (a connection killed while
            # the loop slept says nothing of the store), then, with the store unreachable,
            # exit; the leases lapse and are reclaimed.
            if not (self.shutdown.stopping and self.shutdown.grace_over()) or self.reconnect.attempts == 1:
                return False
            log.warning("boson: stopping (%s) with the database unreachable: %d running jobs are left to their "
                        "leases", ", ".join(self.shutdown.reasons), len(self.slots.held()))
            return True

    def _tick(self) -> bool:
        """Returns True when the worker is done."""
        self._keep_connection()
        if self.reconnect.down:
            self._recover()
        self.acker.collect()
        self._enforce_timeouts()
        with self.slots.lock:
            self.heartbeat.maybe_beat(self.slots.renewable)
        if self.shutdown.stopping:
            wait = self.lifecycle.drain()
            if wait is None:
                return True
            self._wait(wait)
            return False
        self.admission.start_cleared()
        self.sweeper.maybe_run()
        asked, got = self.admission.admit()
        if self.admission.idle_exit(got):
            return True
        if not (asked and got == asked) or self.slots.busy() >= self.concurrency:
            # Straight on only while slots are free: with every slot taken a tick has
            # nothing to do, and the handlers just started wait for the GIL it holds.
            self.slots.awaited = self.slots.borrows
            self._wait(self._sleep_s())
            self.slots.awaited = False
        return False

    def _recover(self) -> None:
        """The first tick after a database error: before anything else, renew every lease
        held (the beat that failed counted as a beat: the next was a whole interval away,
        and a lease with less than that left lapsed though the store was back in time)."""
        connections[self.using].ensure_connection()
        self.acker.settle()  # a failed flush's attempts are renewed too
        with self.slots.lock:
            held = self.slots.renewable()
            lost = self.heartbeat.beat(held) if held else []
        self.reconnect.back(f"{len(held) - len(lost)} leases renewed, {len(lost)} lost" if held else "no lease held")
        if self.lifecycle.listener is not None:
            self.lifecycle.listener.reconnect()  # its connection may be half-open: nothing on it says so

    def _back_off(self, seconds: float) -> None:
        """Wait out a reconnect backoff. Only a stop request cuts it short (the first, or
        one ending the grace): the waker is also set by handlers returning and by the ack
        thread after a flush, and each cut wait would be one more tick against the
        unreachable store."""
        end = time.monotonic() + seconds
        stopping = self.shutdown.stopping
        while (left := end - time.monotonic()) > 0:
            if self.shutdown.stopping and (not stopping or self.shutdown.grace_over()):
                return
            self.waker.wait(min(left, self.shutdown.seconds_left()))

    def _wait(self, seconds: float) -> None:
        """Sleep on the waker; no call is in flight meanwhile, so none is watched."""
        watch = self.lifecycle.watch
        if watch is not None:
            watch.disarm()
        self.waker.wait(seconds)
        if watch is not None:
            watch.arm(self._reply_s())

    def _sleep_s(self) -> float:
        waits = [self.poll_s, self.sweeper.seconds_left()]
        if self.slots.running:
            waits.append(self.heartbeat.seconds_left())
        if self._next_deadline_s is not None:
            waits.append(self._next_deadline_s)
        return max(min(waits), 0.001)

    def _keep_connection(self) -> None:
        """The loop keeps its connection across ticks: it is closed only when a database
        error made it unusable -- the tick's error handler closes it too. Other aliases
        follow ``CONN_MAX_AGE``."""
        for connection in connections.all(initialized_only=True):
            if connection.alias != self.using:
                connection.close_if_unusable_or_obsolete()
            elif connection.connection is not None and connection.errors_occurred:
                if connection.is_usable():
                    connection.errors_occurred = False
                else:
                    connection.close()

    def _enforce_timeouts(self) -> None:
        """Ack as timed out every running attempt past its deadline on the store clock,
        and ask its handler to stop; note when the next deadline falls."""
        timed = [a for a in self.slots.timed.values() if not a.settled and not finished(a)]
        self._next_deadline_s = None
        if not timed:
            return
        now = clock.now(self.using)
        for attempt in timed:
            left = (attempt.deadline - now).total_seconds()  # type: ignore[operator]
            if left <= 0:
                _time_out(attempt)
            else:
                self._next_deadline_s = min(left, self._next_deadline_s or left)


def _time_out(attempt: Attempt) -> None:
    logs = attempt.logs.collect() if attempt.logs is not None else []
    deliver(attempt, attempt.timeout_finish(logs))
    attempt.interrupt(TaskTimeout(f"job {attempt.job_id} overran timeout_ms={attempt.timeout_ms}; stop now"))
