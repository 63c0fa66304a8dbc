"""Where the loop's acks are flushed: on PostgreSQL, a thread of its own that feeds itself.

The loop's tick used to ack what finished and then admit more, each a round trip to
the database while the other side waited: the worker's CPU idle during one, the
database's during the other. On PostgreSQL the flush runs on this thread, with its own
connection, while the loop admits and starts the next jobs. One flush is in flight at a
time, and when it ends the thread takes what finished meanwhile (``take``, the worker's)
and flushes again, until nothing is left; a handler finishing while the thread is idle
wakes it (``kick``). The loop, blocked in a claim, used to be the one to hand over each
batch: measured at concurrency 1024, flushes then waited 7.7 ms (median) between one
another, the ack connection idle 39% of the drain, for the claim to return. SQLite
takes one writer at a time, so there the flush stays in the loop (``inline``).

A flush on the thread that fails on the database hands its attempts back unsettled and
the thread stops feeding itself: the loop flushes them again once it is through its own
reconnect and backoff, as it did when the flush was its own (inline, the error
propagates to the loop's reconnect and backoff, as before). Any other error is
re-raised in the loop.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence

from django.db import DatabaseError, InterfaceError, connections

from boson_django import database, drivers
from boson_django.worker import network
from boson_django.worker.attempt import Attempt
from boson_django.worker.completer import complete
from boson_django.worker.outcomes import Finish
from boson_django.worker.reconnect import Reconnect
from boson_django.worker.watchdog import Watch, Watchdog

Batch = Sequence[tuple[Attempt, Finish]]


class Acker:
    def __init__(
        self, using: str, *, inline: bool, take: Callable[[], Batch], pending: Callable[[], bool],
        on_flushed: Callable[[], None] | None = None, watchdog: Watchdog | None = None,
        reply_s: Callable[[], float | None] = lambda: None, reconnect: Reconnect | None = None,
    ):
        """``take`` hands over the attempts to ack now (marked ``acking``), ``pending``
        says whether any finished since; ``on_flushed`` runs after each threaded flush.
        The thread's connection gets the worker's options and timeouts; ``watchdog``
        breaks it when a flush waits longer than ``reply_s()``."""
        self._watchdog, self._reply_s = watchdog, reply_s
        #: Logs a failed flush in one line, with the outage's one traceback if it is the first.
        self._reconnect = reconnect or Reconnect(0)
        self._watch: Watch | None = None
        self.using = using
        self.inline = inline
        self._take = take
        self._pending = pending
        self._on_flushed = on_flushed
        self._wake: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[tuple[Batch, BaseException | None]] = queue.SimpleQueue()
        self._busy = False
        self._thread: threading.Thread | None = None
        self._returned: list[Attempt] = []

    @property
    def busy(self) -> bool:
        """The thread is flushing, or about to (a kick it has not answered yet)."""
        return self._busy

    def start(self) -> None:
        if not self.inline and self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="boson-acker", daemon=True)
            self._thread.start()

    def kick(self) -> None:
        """Flush what finished: inline, now, on the caller's thread (the loop); else wake
        the thread unless it is already at work (it takes every finished attempt before
        it rests). Safe from any thread when not inline."""
        if self.inline:
            self._flush_inline()
        elif not self._busy:
            self._busy = True
            self._wake.put(True)

    def flushed(self) -> list[Attempt]:
        """The attempts whose flush ended since the last call, now settled; the attempts of
        a flush that failed on the database are handed back (``acking`` cleared)."""
        acked: list[Attempt] = []
        while True:
            try:
                batch, error = self._done.get_nowait()
            except queue.Empty:
                return acked
            if error is None:
                _ended(batch)
                acked += [attempt for attempt, _ in batch]
                continue
            self._hand_back(batch)
            if not isinstance(error, (DatabaseError, InterfaceError)):
                raise error
            self._reconnect.report(f"flushing {len(batch)} acks failed; they are retried", error)

    def handed_back(self) -> list[Attempt]:
        """The attempts of flushes that failed, unsettled, since the last call: the loop
        acks them again."""
        returned, self._returned = self._returned, []
        return returned

    def _hand_back(self, batch: Batch) -> None:
        _ended(batch)
        self._returned += [attempt for attempt, _ in batch]

    def stop(self, timeout_s: float) -> None:
        """Let the flush in flight end (within ``timeout_s``), then end the thread."""
        if self._thread is None:
            return
        self._wake.put(False)
        self._thread.join(timeout_s)

    def _flush_inline(self) -> None:
        batch = self._take()
        if not batch:
            return
        try:
            complete(batch, self.using)
        except BaseException:
            self._hand_back(batch)
            raise
        self._done.put((batch, None))

    def _serve(self) -> None:
        connection = connections[self.using]
        network.harden(connection)
        drivers.dedicate(connection, network.store_timeouts())  # this thread's connection runs only the flushes
        if self._watchdog is not None:
            self._watch = self._watchdog.watch(connection)
        while self._wake.get():
            try:
                self._flush_until_done()
            except BaseException as exc:  # noqa: BLE001 -- a bug here must stop the loop, not hang it
                self._busy = False
                self._done.put(((), exc))
                if self._on_flushed is not None:
                    self._on_flushed()
        connections[self.using].close()

    def _flush_until_done(self) -> None:
        """Flush batch after batch while attempts keep finishing; rest when none is left.
        ``busy`` drops before the last look, so a handler finishing in between either is
        seen here or sees the thread idle and kicks it."""
        while True:
            batch = self._take()
            if not batch:
                self._busy = False
                if not self._pending():
                    return
                self._busy = True
                continue
            error = self._flush(batch)
            self._done.put((batch, error))
            batch = None  # resting, keep nothing of this flush's jobs
            if self._on_flushed is not None:
                self._on_flushed()
            if error is not None:  # the loop acks them again after its own backoff
                self._busy = False
                return

    def _flush(self, batch: Batch) -> BaseException | None:
        try:
            if self._watch is None:
                complete(batch, self.using)
            else:
                with self._watch.armed(self._reply_s()):
                    complete(batch, self.using)
        except (DatabaseError, InterfaceError) as exc:
            database.close_quietly(self.using)
            return exc
        except Exception as exc:  # noqa: BLE001 -- re-raised in the loop
            return exc
        return None


def _ended(batch: Batch) -> None:
    for attempt, _ in batch:
        attempt.acking = False
