"""A worker's lifecycle: what runs before its first tick, while it drains, after its last.

:meth:`Lifecycle.start` installs the signal handlers, log capture and collector
threshold, takes the loop's connection for the worker's statements, starts the
listener, the handler threads and the ack thread. :meth:`Lifecycle.drain` runs each
tick once a stop was asked: it waits for the running jobs within the grace, then
releases the rest. :meth:`Lifecycle.finish` undoes :meth:`start`, step by step, each
step best effort.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, connections

from boson_django import conf, database, drivers, services
from boson_django.errors import LeaseRejected
from boson_django.services import wakeups
from boson_django.worker import gctuning, logcapture, network
from boson_django.worker.acker import Acker
from boson_django.worker.admission import Admission
from boson_django.worker.attempt import Attempt
from boson_django.worker.heartbeat import Heartbeat
from boson_django.worker.notify import Listener, Waker
from boson_django.worker.reconnect import Reconnect
from boson_django.worker.shutdown import Shutdown
from boson_django.worker.slots import Slots, finished
from boson_django.worker.sweeper import Sweeper
from boson_django.worker.watchdog import Watch, Watchdog

log = logging.getLogger("boson_django.worker")


class Lifecycle:
    def __init__(self, worker_id: str, using: str, *, queues: list[str], notify: bool | None, burst: bool,
                 handle_signals: bool, poll_s: float, reply_s: float | None, shutdown: Shutdown, waker: Waker,
                 watchdog: Watchdog, heartbeat: Heartbeat, sweeper: Sweeper, reconnect: Reconnect, slots: Slots,
                 acker: Acker, admission: Admission):
        self.worker_id, self.using, self.queues = worker_id, using, queues
        self.notify, self.burst, self.handle_signals = notify, burst, handle_signals
        self.poll_s, self.reply_s = poll_s, reply_s
        self.shutdown, self.waker, self.watchdog, self.heartbeat = shutdown, waker, watchdog, heartbeat
        self.sweeper, self.reconnect, self.slots, self.acker, self.admission = sweeper, reconnect, slots, acker, admission
        #: The loop's connection, watched: broken when an answer is overdue.
        self.watch: Watch | None = None
        self.listener: Listener | None = None
        self.announced_stop = False
        self.forget_waker: Callable[[], None] = lambda: None

    def start(self) -> None:
        if self.handle_signals:
            self.shutdown.install()
        logcapture.install(conf.get().LOG_CAPTURE_LEVEL)
        self.watch = self._own_connection()
        if self.use_notify():
            self.listener = Listener(self.waker, self.using, self.queues, worker_id=self.worker_id,
                                     on_revoked=self.renew_now)
            self.listener.start()
        log.info("boson: worker %s up (queues=%s, concurrency=%d, %s)", self.worker_id, ",".join(self.queues) or "*",
                 self.slots.concurrency, "notify" if self.listener else "poll only")
        self.admission.start()
        self.acker.start()
        gctuning.raise_threshold(conf.get().GC_THRESHOLD)
        # last, with the collector's threshold: finish undoes them
        self.forget_waker = wakeups.wake_here(self.queues, self.waker.set, self.worker_id, self.renew_now)

    def _own_connection(self) -> Watch:
        """The loop's connection: the worker's connection options (opened again if it is
        open without them), the store's timeouts, watched; it runs only the worker's
        statements (``drivers.dedicate``)."""
        connection = connections[self.using]
        network.harden(connection)
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()
        drivers.dedicate(connection, network.store_timeouts())
        return self.watchdog.watch(connection)

    def use_notify(self) -> bool:
        """Whether the worker listens for NOTIFY, or only polls."""
        settings = conf.get()
        notify = settings.NOTIFY if self.notify is None else self.notify
        if not (notify and wakeups.enabled(self.using) and not self.burst):
            return False
        if settings.POOLER == conf.TRANSACTION_POOLER:
            log.warning("boson: worker %s polls every %d ms instead of listening: LISTEN needs a session of its own, "
                        "and BOSON['POOLER'] is 'transaction' (set BOSON['NOTIFY'] = False to say so, or connect the "
                        "worker to PostgreSQL directly to be woken at once)", self.worker_id, round(self.poll_s * 1000))
            return False
        return True

    def renew_now(self) -> None:
        """A lease of ours was revoked (an operator's cancel): the next tick renews every
        lease, finds which one is lost and asks its handler to stop. Called on the
        listener's thread, or the cancelling thread of this process; nothing to do while
        the worker holds no lease (the listener's first connect)."""
        if self.heartbeat.lengths:
            self.heartbeat.due_now()
            self.waker.set()

    def drain(self) -> float | None:
        """Stopping: how long to wait for the running jobs (within the grace), or None
        once none is held or the grace is over and the rest were released."""
        if not self.announced_stop:
            self.announced_stop = True
            self._hand_back_gated()
            log.info("boson: stopping (%s); %d running jobs have %.1fs to finish",
                     ", ".join(self.shutdown.reasons), len(self.slots.held()), self.shutdown.seconds_left())
        if not self.slots.held():
            return None
        if self.shutdown.grace_over():
            # A handler that returned since this tick's collect is acked, not released (its
            # job would run again); the flush in flight settles the attempts it holds.
            self.acker.collect()
            self.release([a for a in self.slots.held() if not a.acking and not finished(a)])
            return None
        return min(self.shutdown.seconds_left(), self.heartbeat.seconds_left(), self.poll_s)

    def _hand_back_gated(self) -> None:
        """A stopping worker starts no new job: the gated ones, claimed but never started,
        go back to their queue at once (attempt and crash counts kept)."""
        gated = [attempt for attempt, _ in self.slots.gated]
        self.slots.gated.clear()
        self.release([attempt for attempt in gated if not attempt.settled], "never started: the worker is stopping")
        for attempt in gated:
            self.slots.let_go(attempt)

    def release(self, held: list[Attempt], why: str = "shutdown grace over") -> None:
        """Give the leases back (``services.release``); a refused release is logged."""
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

    def finish(self) -> None:
        """Undo :meth:`start`; a step that fails is logged and the others still run."""
        if self.watch is not None:
            self.watch.arm(self.reply_s)  # the duties' release, the session's reset: bounded
        for step in (self.forget_waker, self._stop_acker, self._let_go_of_all, self._release_duties,
                     self.admission.shutdown, logcapture.uninstall, gctuning.restore_threshold,
                     self._uninstall_signals, self._give_back_connection):
            try:
                step()
            except Exception:  # noqa: BLE001 -- best effort on the way out
                log.warning("boson: shutdown step %s failed", step.__name__, exc_info=True)
        self.watchdog.stop()
        if self.listener is not None:
            self.listener.stop()
        log.info("boson: worker %s stopped after %d jobs", self.worker_id, self.admission.admitted)

    def _stop_acker(self) -> None:
        """The flush in flight is one statement: it gets the grace left, at least a second
        (a burst run ends with no grace set)."""
        self.acker.stop(timeout_s=max(min(self.shutdown.seconds_left(), 30.0), 1.0))

    def _let_go_of_all(self) -> None:
        """After the ack thread ended: free the slots of its last flush (the loop may have
        exited before collecting it), then let go of every attempt still held -- a lease
        not acked lapses and is reclaimed. Nothing of a job outlives the worker in a
        reference cycle (``Slots.let_go``)."""
        try:
            self.acker.settle()
        finally:
            self.slots.gated.clear()
            for attempt in list(self.slots.running.values()):
                self.slots.let_go(attempt)

    def _release_duties(self) -> None:
        """Not with the store unreachable: each try would wait out a connect timeout, and
        the duty leases lapse on their own within three sweep intervals."""
        if not self.reconnect.down:
            self.sweeper.release()

    def _uninstall_signals(self) -> None:
        """Only what :meth:`start` installed: a reloading worker's handlers belong to the
        main thread that installed them (:mod:`.reloading`), and only it may take them back."""
        if self.handle_signals:
            self.shutdown.uninstall()

    def _give_back_connection(self) -> None:
        connection = connections[self.using]
        if self.reconnect.down:
            database.close_quietly(self.using)
        drivers.undedicate(connection)
        network.soften(connection)
