"""The worker loop: admit, run, ack, renew, sweep, sleep -- until told to stop.

Each tick is a handful of short transactions on the loop's own connection; no
transaction is ever open while a handler runs (handlers run on other threads and make
their own short ones through their context). Admission asks only for as many jobs as
there are free slots, so a worker never holds a lease it cannot start. The loop sleeps
on a :class:`~boson_django.worker.notify.Waker` that a finished job, a NOTIFY, a signal
or the poll interval sets -- it never spins. A database error closes the connection and
backs off (:mod:`.reconnect`: capped by ``RECONNECT_MAX_MS`` and by the time left on the
leases held); the first tick that reaches the store again renews every lease before
anything else, and a lease that lapsed meanwhile is reclaimed by a sweep, so no job is
ever lost.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import DatabaseError, InterfaceError, connections

from boson_django import clock, conf, drivers, services
from boson_django.errors import LeaseRejected
from boson_django import database
from boson_django.services import wakeups
from boson_django.services.types import LeaseRef
from boson_django.worker import gctuning, logcapture, network
from boson_django.worker.acker import Acker
from boson_django.worker.attempt import Attempt
from boson_django.states import Outcome
from boson_django.worker.delivery import deliver
from boson_django.worker.executor import Executor, Known
from boson_django.worker.futures import finish_of
from boson_django.worker.heartbeat import Heartbeat
from boson_django.worker.notify import Listener, Waker
from boson_django.worker.outcomes import Finish, TaskTimeout
from boson_django.worker.reconnect import Reconnect
from boson_django.worker.shutdown import Shutdown
from boson_django.worker.sweeper import Sweeper
from boson_django.worker.watchdog import Watch, Watchdog

log = logging.getLogger("boson_django.worker")


def admission_batch(concurrency: int) -> int:
    """The most jobs one tick admits: a quarter of the slots, between 64 and 256.

    A claim's time grows with its batch (about 50 us per job, little of it fixed), and a
    slot comes back only when its ack lands. A loop admitting every free slot at once
    drifts into two large batches in flight, each waiting for the other's claim and flush:
    a drain at concurrency 256 ran at ~7,900 jobs/s that way and ~9,000 with batches of 64,
    with 1024 slots ~10,400 with batches of 128 (measured in-process, no-op jobs). Since
    the acker feeds itself, 1024 slots run best in batches of 256 (three in-process pairs
    against 128: +3-4%; 512 and 1024 were slower). Below 64 slots a smaller batch only
    adds claims (concurrency 32 in batches of 8: 5,200 -> 3,500 jobs/s), so a small worker
    still admits all its free slots."""
    return min(concurrency, max(64, min(256, concurrency // 4)))


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
        self.admit_batch = admission_batch(self.concurrency)
        self.poll_s = (o.poll_interval_ms or s.POLL_INTERVAL_MS) / 1000
        self.waker = Waker()
        self.shutdown = Shutdown(s.SHUTDOWN_GRACE_MS if o.grace_ms is None else o.grace_ms, self.waker.set)
        self.heartbeat = Heartbeat(s.HEARTBEAT_MS, self.using)
        self.sweeper = Sweeper(self.worker_id, self.using, s.SWEEP_INTERVAL_MS, s.SWEEP_BATCH, self._wake_others)
        self.reconnect = Reconnect(s.RECONNECT_MAX_MS)
        #: Breaks a connection of the loop or the ack thread whose answer is overdue
        #: (``REPLY_TIMEOUT_MS``, half the time left on the leases, the grace when stopping).
        self.watchdog = Watchdog(stop_at=lambda: self.shutdown.deadline)
        self.watch: Watch | None = None
        self.reply_s = s.REPLY_TIMEOUT_MS / 1000 or None
        self.acker = Acker(self.using, inline=drivers.for_alias(self.using).acks_inline,
                           take=self._take_for_flush, pending=lambda: bool(self.finished), on_flushed=self.waker.set,
                           watchdog=self.watchdog, reply_s=self._reply_s, reconnect=self.reconnect)
        #: A small worker admits all its free slots at once, so its claims and its flushes
        #: would take turns: it claims into slots whose acks are in flight (``_admit``). A
        #: large one admits a quarter of its slots at a time and overlaps them already
        #: (at concurrency 1024, claiming into such slots too drained 8-33% slower).
        self._borrows = not self.acker.inline and self.admit_batch >= self.concurrency
        self.running: dict[LeaseRef, Attempt] = {}
        #: Attempts whose handler returned and that wait for their ack: appended by the
        #: thread that ran them, so a tick reads only these, never every running one.
        self.finished: deque[Attempt] = deque()
        #: Finished attempts with in-ack effects: the loop acks each in its own transaction.
        self.effectful: deque[tuple[Attempt, Finish]] = deque()
        #: Admitted into the slots of finished attempts whose acks had not committed yet
        #: (``_admit``): each waits, with the attempts whose slots it took, to be started.
        self.gated: deque[tuple[Attempt, tuple[Attempt, ...]]] = deque()
        #: The loop sleeps with no slot free: the next handler to return wakes it.
        self._wants_slot = False
        #: Held by whoever marks attempts ``acking`` (the acker's take) and by a lease
        #: renewal from its choice of leases to the end of its statement: a renewal never
        #: names a lease a flush holds, and the two never lock rows in different orders.
        self.leases_lock = threading.Lock()
        #: The running attempts whose job has a ``timeout_ms`` (the only ones a tick checks).
        self.timed: dict[LeaseRef, Attempt] = {}
        self.admitted = 0
        self.listener: Listener | None = None
        self._announced_stop = False
        self._next_deadline_s: float | None = None
        self._forget_waker: Callable[[], None] = lambda: None

    # -- lifecycle -------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (or, in burst mode, until nothing is due); returns 0."""
        executor = self._start()
        try:
            while not self._step(executor):
                pass
        finally:
            self._finish(executor)
        return 0

    def stop(self, reason: str = "stop()") -> None:
        """Ask the loop to stop gracefully (what SIGTERM does); safe from any thread.
        ``reason`` is logged with the stop."""
        self.shutdown.request(reason)

    def _start(self) -> Executor:
        if self.options.handle_signals:
            self.shutdown.install()
        logcapture.install(conf.get().LOG_CAPTURE_LEVEL)
        self.watch = self._own_connection()
        if self._use_notify():
            self.listener = Listener(self.waker, self.using, self.options.queues, worker_id=self.worker_id,
                                     on_revoked=self._renew_now)
            self.listener.start()
        log.info("boson: worker %s up (queues=%s, concurrency=%d, %s)", self.worker_id,
                 ",".join(self.options.queues) or "*", self.concurrency, "notify" if self.listener else "poll only")
        executor = Executor(self.concurrency, "boson")
        self.acker.start()
        gctuning.raise_threshold(conf.get().GC_THRESHOLD)
        # last, with the collector's threshold: _finish undoes them
        self._forget_waker = wakeups.wake_here(self.options.queues, self.waker.set, self.worker_id, self._renew_now)
        return executor

    def _own_connection(self) -> Watch:
        """The loop's connection: the worker's connection options (opened again if it is
        open without them), the store's timeouts, watched; it runs only the worker's
        statements (``database.dedicate``)."""
        connection = connections[self.using]
        network.harden(connection)
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()
        database.dedicate(connection, network.store_timeouts())
        return self.watchdog.watch(connection)

    def _reply_s(self) -> float | None:
        """How long the store may take to answer the loop's next calls: ``REPLY_TIMEOUT_MS``,
        and at most half the time left on the leases held (at least half a second): a
        renewal that goes unanswered is tried again on a new connection in time."""
        left = self.heartbeat.lease_left_s()
        if left is None:
            return self.reply_s
        return min(self.reply_s or float("inf"), max(left / 2, 0.5))

    def _wait(self, seconds: float) -> None:
        """Sleep on the waker; no call is in flight meanwhile, so none is watched."""
        if self.watch is not None:
            self.watch.disarm()
        self.waker.wait(seconds)
        if self.watch is not None:
            self.watch.arm(self._reply_s())

    def _use_notify(self) -> bool:
        settings = conf.get()
        wanted = settings.NOTIFY if self.options.notify is None else self.options.notify
        if not (wanted and wakeups.enabled(self.using) and not self.options.burst):
            return False
        if settings.POOLER == conf.TRANSACTION_POOLER:
            log.warning("boson: worker %s polls every %d ms instead of listening: LISTEN needs a session of its own, "
                        "and BOSON['POOLER'] is 'transaction' (set BOSON['NOTIFY'] = False to say so, or connect the "
                        "worker to PostgreSQL directly to be woken at once)", self.worker_id, round(self.poll_s * 1000))
            return False
        return True

    def _finish(self, executor: Executor) -> None:
        if self.watch is not None:
            self.watch.arm(self.reply_s)  # the duties' release, the session's reset: bounded
        for step in (self._forget_waker, self._stop_acker, self._release_duties, executor.shutdown, logcapture.uninstall,
                     gctuning.restore_threshold, self._uninstall_signals, self._give_back_connection):
            try:
                step()
            except Exception:  # noqa: BLE001 -- best effort on the way out
                log.warning("boson: shutdown step %s failed", step.__name__, exc_info=True)
        self.watchdog.stop()
        if self.listener is not None:
            self.listener.stop()
        log.info("boson: worker %s stopped after %d jobs", self.worker_id, self.admitted)

    def _uninstall_signals(self) -> None:
        """Only what ``_start`` installed: a reloading worker's handlers belong to the main
        thread that installed them (:mod:`.reloading`), and only it may take them back."""
        if self.options.handle_signals:
            self.shutdown.uninstall()

    def _release_duties(self) -> None:
        """Not with the store unreachable: each try would wait out a connect timeout, and
        the duty leases lapse on their own within three sweep intervals."""
        if not self.reconnect.down:
            self.sweeper.release()

    def _give_back_connection(self) -> None:
        connection = connections[self.using]
        if self.reconnect.down:
            database.close_quietly(self.using)
        database.undedicate(connection)
        network.soften(connection)

    def _stop_acker(self) -> None:
        """The flush in flight is one statement: it gets the grace left, at least a second
        (a burst run ends with no grace set)."""
        self.acker.stop(timeout_s=max(min(self.shutdown.seconds_left(), 30.0), 1.0))

    def _step(self, executor: Executor) -> bool:
        """One guarded tick; a database error backs off instead of ending the worker."""
        try:
            watch = self.watch
            if watch is None:
                done = self._tick(executor)
            else:
                watch.arm(self._reply_s())
                try:
                    done = self._tick(executor)
                finally:
                    watch.disarm()
            if self.reconnect.traced:
                self.reconnect.settled()
            return done
        except (DatabaseError, InterfaceError) as exc:
            wait = self.reconnect.failed(exc, self._lease_left_s())
            database.close_quietly(self.using)
            self._back_off(wait)
            # Past the grace: one more tick on a new connection (a connection killed while
            # the loop slept says nothing of the store), then, with the store unreachable,
            # exit; the leases lapse and are reclaimed.
            if not (self.shutdown.stopping and self.shutdown.grace_over()) or self.reconnect.attempts == 1:
                return False
            log.warning("boson: stopping (%s) with the database unreachable: %d running jobs are left to their "
                        "leases", ", ".join(self.shutdown.reasons), len(self._held()))
            return True

    def _lease_left_s(self) -> float | None:
        """The least time left on a lease held, by this process's clock (None: none held)."""
        now = time.monotonic()
        return min((a.lease_left_s(now) for a in self.running.values() if not a.settled and a.lease_ms), default=None)

    def _recover(self) -> None:
        """The first tick after a database error: before anything else, renew every lease
        held (the beat that failed counted as a beat: the next was a whole interval away,
        and a lease with less than that left lapsed though the store was back in time)."""
        connections[self.using].ensure_connection()
        self._forget(self.acker.flushed())  # a failed flush's attempts are renewed too
        self.finished.extend(self.acker.handed_back())
        with self.leases_lock:
            held = self._renewable()
            lost = self.heartbeat.beat(held) if held else []
        self.reconnect.back(f"{len(held) - len(lost)} leases renewed, {len(lost)} lost" if held else "no lease held")
        if self.listener is not None:
            self.listener.reconnect()  # its connection may be half-open: nothing on it says so

    def _back_off(self, seconds: float) -> None:
        """Wait out a reconnect backoff. Only a stop request cuts it short (the first, or
        one ending the grace): the waker is also set by handlers returning and by the ack
        thread after a flush -- a failed one too -- and each cut wait was one more tick
        against the unreachable store (~180 reconnects a second while it was down)."""
        end = time.monotonic() + seconds
        stopping = self.shutdown.stopping
        while (left := end - time.monotonic()) > 0:
            if self.shutdown.stopping and (not stopping or self.shutdown.grace_over()):
                return
            self.waker.wait(min(left, self.shutdown.seconds_left()))


    # -- one tick ----------------------------------------------------------------------

    def _tick(self, executor: Executor) -> bool:
        """Returns True when the worker is done."""
        self._keep_connection()
        if self.reconnect.down:
            self._recover()
        self._collect()
        self._enforce_timeouts()
        with self.leases_lock:
            self.heartbeat.maybe_beat(self._renewable)
        if self.shutdown.stopping:
            return self._drain()
        self._start_cleared(executor)
        self.sweeper.maybe_run()
        asked, got = self._admit(executor)
        if self._idle_exit(got):
            return True
        if not (asked and got == asked) or self._busy_slots() >= self.concurrency:
            # Straight on only while slots are free: with every slot taken a tick has
            # nothing to do, and the handlers just started wait for the GIL it holds
            # (an idle worker's wake-up: the job's handler started a tick later).
            self._wants_slot = self._borrows
            self._wait(self._sleep_s())
            self._wants_slot = False
        return False

    def _held(self) -> list[Attempt]:
        return [a for a in self.running.values() if not a.settled]

    def _renewable(self) -> list[Attempt]:
        """Held leases not in the flush in flight (its statement holds their rows; a renewal
        locking them in another order could deadlock with it)."""
        return [a for a in self.running.values() if not a.settled and not a.acking]

    def _finished(self, attempt: Attempt) -> bool:
        return attempt.future is not None and attempt.future.done()

    def _busy_slots(self) -> int:
        """Slots whose handler has not returned (or not started)."""
        return len(self.running) - len(self._lendable())

    def _lendable(self) -> list[Attempt]:
        """Finished attempts whose slots can be claimed into while their acks are in flight
        (``_admit``): none in a worker that does not borrow."""
        if not self._borrows:
            return []
        return [attempt for attempt in self.running.values() if self._finished(attempt)]

    def _on_done(self, attempt: Attempt, _future: object = None) -> None:
        """A handler returned (called on its thread). On PostgreSQL the acker is woken if
        it rests (at work, it takes this attempt with the others before it rests); on
        SQLite the loop flushes, so the loop is woken."""
        self.finished.append(attempt)
        if self._wants_slot:  # the loop sleeps for a slot: claim into this one
            self._wants_slot = False
            self.waker.set()
        if self.acker.inline:
            self.waker.set()
        elif not self.acker.busy:
            self.acker.kick()

    def _collect(self) -> None:
        """Settle what the acker flushed (removed from ``running``), give it back what a
        failed flush handed back, ack the attempts with in-ack effects one transaction
        each, and have the acker flush the rest (inline on SQLite)."""
        self._forget(self.acker.flushed())
        self.finished.extend(self.acker.handed_back())
        if self.finished:
            self.acker.kick()
            self._forget(self.acker.flushed())
        self._deliver_effectful()  # after the kick: on SQLite its take has just set them aside

    def _take_for_flush(self) -> list[tuple[Attempt, Finish]]:
        """Every finished attempt for the next flush, marked ``acking`` (the acker's
        thread, or the loop's on SQLite); those with in-ack effects go to the loop."""
        batch: list[tuple[Attempt, Finish]] = []
        with self.leases_lock:
            while self.finished:
                attempt = self.finished.popleft()  # one by one: handler threads append meanwhile
                finish = finish_of(attempt.future, attempt.interruption)  # type: ignore[arg-type]
                if attempt.effects and finish.outcome is Outcome.SUCCESS:
                    self.effectful.append((attempt, finish))
                else:
                    attempt.acking = True
                    batch.append((attempt, finish))
        if self.effectful and not self.acker.inline:
            self.waker.set()
        return batch

    def _deliver_effectful(self) -> None:
        while self.effectful:
            attempt, finish = self.effectful[0]
            deliver(attempt, finish)  # a database error leaves it first in line for the next tick
            self.effectful.popleft()
            self._let_go(attempt)

    def _forget(self, acked: list[Attempt]) -> None:
        for attempt in acked:
            self._let_go(attempt)

    def _hold(self, attempt: Attempt) -> None:
        self.running[attempt.lease] = attempt
        self.heartbeat.hold(attempt)
        if attempt.unit.envelope.timeout_ms:
            self.timed[attempt.lease] = attempt

    def _let_go(self, attempt: Attempt) -> None:
        del self.running[attempt.lease]
        self.heartbeat.drop(attempt)
        self.timed.pop(attempt.lease, None)
        # The future's done-callback names the attempt: a reference cycle that only the
        # garbage collector could free, taking every object of the job with it (its
        # unit, envelope, TaskResult, logs). Broken here, a job's objects go as soon as
        # it is acked, and the collector has nothing to chase.
        attempt.future = None

    def _admit(self, executor: Executor) -> tuple[int, int]:
        # An attempt keeps its slot until its ack lands: a job started in the slot of one
        # whose ack is in flight could kill the process (a poison job) before that ack
        # commits, and the finished job would be reclaimed as a crash. The claim into such
        # a slot need not wait, only the start: claimed while the flush is in flight, the
        # job waits in ``gated`` until the acks of every attempt finished at the time of
        # the claim have landed (at concurrency 10 the claim and the flush, each ~0.6 ms
        # of the server, then overlap instead of taking turns).
        lendable = self._lendable()
        vacant = max(self.concurrency - len(self.running), 0)
        free = min(self.concurrency - len(self.running) + len(lendable), self.admit_batch)
        if self.options.max_jobs is not None:
            free = min(free, self.options.max_jobs - self.admitted)
        if free <= 0:
            return 0, 0
        gate = tuple(lendable) if free > vacant else ()
        asked_at = time.monotonic()
        units = services.admit(self.worker_id, self.options.queues, free, using=self.using)
        known: Known = {}
        for unit in units:
            attempt = Attempt(unit, self.worker_id, self.using, lease_mono=asked_at)
            self._hold(attempt)
            if vacant:
                vacant -= 1
                self._submit(executor, attempt, known)
            else:
                self.gated.append((attempt, gate))
        self.admitted += len(units)
        return free, len(units)

    def _submit(self, executor: Executor, attempt: Attempt, known: Known) -> None:
        executor.submit(attempt, functools.partial(self._on_done, attempt), known)

    def _start_cleared(self, executor: Executor) -> None:
        """Start the gated attempts whose slots' acks have landed (in the order claimed);
        one whose lease was lost meanwhile never starts."""
        known: Known = {}
        cleared: tuple[Attempt, ...] | None = None  # the jobs of one claim share their gate
        while self.gated:
            attempt, gate = self.gated[0]
            if gate is not cleared:
                if any(self.running.get(taken.lease) is taken for taken in gate):
                    return
                cleared = gate
            self.gated.popleft()
            if attempt.settled:
                self._let_go(attempt)
            else:
                self._submit(executor, attempt, known)

    def _idle_exit(self, got: int) -> bool:
        # Held, not running: a handler that overran its timeout keeps its (daemon) thread
        # after its job was acked, and one that never returns kept --burst from exiting.
        if self._held() or got:
            return False
        if self.options.max_jobs is not None and self.admitted >= self.options.max_jobs:
            return True
        if not self.options.burst:
            return False
        # Burst: sweeps run on their interval while there is work; before exiting, one
        # more sweep pass, so jobs it makes due (promoted, reclaimed) are drained too.
        done = self.sweeper.run()
        return not (done.get("boson.promote") or done.get("boson.reclaim"))

    def _keep_connection(self) -> None:
        """The loop keeps its connection across ticks (a reconnect per tick would cost more
        than the tick): it is closed only when a database error made it unusable -- the
        tick's error handler closes it too. Other aliases follow ``CONN_MAX_AGE``."""
        for connection in connections.all(initialized_only=True):
            if connection.alias != self.using:
                connection.close_if_unusable_or_obsolete()
            elif connection.connection is not None and connection.errors_occurred:
                if connection.is_usable():
                    connection.errors_occurred = False
                else:
                    connection.close()

    def _enforce_timeouts(self) -> None:
        timed = [a for a in self.timed.values() if not a.settled and not self._finished(a)]
        self._next_deadline_s = None
        if not timed:
            return
        now = clock.now(self.using)
        for attempt in timed:
            left = (attempt.deadline - now).total_seconds()  # type: ignore[operator]
            if left <= 0:
                self._time_out(attempt)
            else:
                self._next_deadline_s = min(left, self._next_deadline_s or left)

    def _time_out(self, attempt: Attempt) -> None:
        logs = attempt.logs.collect() if attempt.logs is not None else []
        deliver(attempt, attempt.timeout_finish(logs))
        attempt.interrupt(TaskTimeout(f"job {attempt.job_id} overran timeout_ms={attempt.timeout_ms}; stop now"))

    def _drain(self) -> bool:
        """Stopping: wait for running jobs within the grace, then release the rest."""
        if not self._announced_stop:
            self._announced_stop = True
            self._hand_back_gated()
            log.info("boson: stopping (%s); %d running jobs have %.1fs to finish",
                     ", ".join(self.shutdown.reasons), len(self._held()), self.shutdown.seconds_left())
        held = self._held()
        if not held:
            return True
        if self.shutdown.grace_over():
            # A handler that returned since this tick's collect is acked, not released (its
            # job would run again); the flush in flight settles the attempts it holds.
            self._collect()
            self._release([a for a in self._held() if not a.acking and not self._finished(a)])
            return True
        self._wait(min(self.shutdown.seconds_left(), self.heartbeat.seconds_left(), self.poll_s))
        return False

    def _hand_back_gated(self) -> None:
        """A stopping worker starts no new job: the gated ones, claimed but never started,
        go back to their queue at once (attempt and crash counts kept)."""
        gated = [attempt for attempt, _ in self.gated]
        self.gated.clear()
        self._release([attempt for attempt in gated if not attempt.settled], "never started: the worker is stopping")
        for attempt in gated:
            self._let_go(attempt)

    def _release(self, held: list[Attempt], why: str = "shutdown grace over") -> None:
        for attempt in held:
            try:
                self._release_lease(attempt)
                log.info("boson: released job %s (%s)", attempt.job_id, why)
            except LeaseRejected as exc:
                log.warning("boson: could not release job %s: %s", attempt.job_id, exc)
            attempt.lost("released because the worker is shutting down")

    def _release_lease(self, attempt: Attempt) -> None:
        """``services.release``, once more on a new connection when the loop's is found
        dead (killed while the loop slept, a server restart): past the grace there is no
        later tick to retry it, and the job would wait out its lease and count as a crash.
        A release that did commit before its reply was lost is refused the second time."""
        try:
            services.release(attempt.lease, using=self.using)
        except (DatabaseError, InterfaceError):
            log.warning("boson: releasing job %s failed; reconnecting to try once more", attempt.job_id, exc_info=True)
            database.close_quietly(self.using)
            services.release(attempt.lease, using=self.using)

    def _sleep_s(self) -> float:
        waits = [self.poll_s, self.sweeper.seconds_left()]
        if self.running:
            waits.append(self.heartbeat.seconds_left())
        if self._next_deadline_s is not None:
            waits.append(self._next_deadline_s)
        return max(min(waits), 0.001)

    def _renew_now(self) -> None:
        """A lease of ours was revoked (an operator's cancel): the next tick renews every
        lease, finds which one is lost and asks its handler to stop. Called on the
        listener's thread, or the cancelling thread of this process; nothing to do while
        the worker holds no lease (the listener's first connect)."""
        if self.heartbeat.lengths:
            self.heartbeat.due_now()
            self.waker.set()

    def _wake_others(self) -> None:
        """A sweep made jobs available: wake the workers of this process (this loop among
        them: it is registered while it runs) and, via NOTIFY, idle peers."""
        wakeups.notify_at_commit([wakeups.ANY_QUEUE], self.using)


