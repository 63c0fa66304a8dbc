"""Acking: a finished attempt -> the completer -> its slot freed.

The thread that ran a handler hands its attempt over (:meth:`Acker.finished_one`). The
acker takes every finished attempt for the next flush, marked ``acking``, and acks them
through :func:`.completer.complete`; at its next tick the loop frees the slots of those
whose flush ended (:meth:`Acker.collect`). Attempts with in-ack effects are acked one
transaction each on the loop's thread (:func:`.completer.deliver`). Nothing here calls
back into the loop: it only sets the loop's waker.

Where a flush runs is the driver's choice (``Driver.acks_inline``): inline, on the
loop's thread during its tick (an engine with one writer at a time); else on a thread
of its own with its own connection, while the loop admits and starts the next jobs. One
flush is in flight at a time; when it ends the thread takes what finished meanwhile and
flushes again until nothing is left; a handler finishing while it rests wakes it.

A flush on the thread that fails on the database hands its attempts back unsettled and
the thread rests: the loop acks them again once it is through its own reconnect and
backoff. Inline, the error propagates to the loop's reconnect and backoff. Any other
error of the thread is raised in the loop.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence

from django.db import DatabaseError, InterfaceError, connections

from boson_django import database, drivers
from boson_django.states import Outcome
from boson_django.worker import network
from boson_django.worker.attempt import Attempt
from boson_django.worker.completer import complete, deliver
from boson_django.worker.futures import finish_of
from boson_django.worker.notify import Waker
from boson_django.worker.outcomes import Finish
from boson_django.worker.reconnect import Reconnect
from boson_django.worker.slots import Slots
from boson_django.worker.watchdog import Watch, Watchdog

Batch = Sequence[tuple[Attempt, Finish]]


class Acker:
    def __init__(
        self, using: str, slots: Slots, waker: Waker, *, inline: bool, watchdog: Watchdog | None = None,
        reply_s: Callable[[], float | None] = lambda: None, reconnect: Reconnect | None = None,
    ):
        """Frees the attempts' ``slots`` once acked and sets the loop's ``waker`` after each
        threaded flush. The thread's connection gets the worker's options and timeouts;
        ``watchdog`` breaks it when a flush waits longer than ``reply_s()``."""
        self._watchdog, self._reply_s = watchdog, reply_s
        #: Logs a failed flush in one line, with the outage's one traceback if it is the first.
        self._reconnect = reconnect or Reconnect(0)
        self._watch: Watch | None = None
        self.using = using
        self.inline = inline
        self.slots = slots
        self._waker = waker
        #: Attempts whose handler returned and that wait for their ack: appended by the
        #: thread that ran them, so a tick reads only these, never every running one.
        self.finished: deque[Attempt] = deque()
        #: Finished attempts with in-ack effects: the loop acks each in its own transaction.
        self.effectful: deque[tuple[Attempt, Finish]] = deque()
        self._wake: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[tuple[Batch, BaseException | None]] = queue.SimpleQueue()
        self._busy = False
        self._thread: threading.Thread | None = None
        self._returned: list[Attempt] = []

    def finished_one(self, attempt: Attempt, _future: object = None) -> None:
        """A handler returned (called on its thread): wake the loop if it waits for a
        slot or flushes inline, else the ack thread if it rests (at work, it takes this
        attempt with the others before it rests)."""
        self.finished.append(attempt)
        if self.slots.awaited:  # the loop sleeps for a slot: claim into this one
            self.slots.awaited = False
            self._waker.set()
        if self.inline:
            self._waker.set()
        elif not self._busy:
            self.kick()

    def collect(self) -> None:
        """On the loop's thread: free the slots whose flush ended, take back the attempts
        of a failed flush, flush what finished (inline: now), then ack the attempts with
        in-ack effects one transaction each. A database error propagates; what it
        interrupted is acked again at the next call."""
        self.settle()
        if self.finished:
            self.kick()
            self.settle()
        self._deliver_effectful()  # after the kick: inline, its take has just set them aside

    def settle(self) -> None:
        """Free the slots of the attempts whose flush ended; the attempts of a failed
        flush wait, unsettled, for the next."""
        for attempt in self._flushed():
            self.slots.let_go(attempt)
        self.finished.extend(self._handed_back())

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

    def _flushed(self) -> list[Attempt]:
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

    def _handed_back(self) -> list[Attempt]:
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

    def _take(self) -> list[tuple[Attempt, Finish]]:
        """Every finished attempt for the next flush, marked ``acking``; those with
        in-ack effects are set aside for the loop."""
        batch: list[tuple[Attempt, Finish]] = []
        with self.slots.lock:
            while self.finished:
                attempt = self.finished.popleft()  # one by one: handler threads append meanwhile
                finish = finish_of(attempt.future, attempt.interruption)  # type: ignore[arg-type]
                if attempt.effects and finish.outcome is Outcome.SUCCESS:
                    self.effectful.append((attempt, finish))
                else:
                    attempt.acking = True
                    batch.append((attempt, finish))
        if self.effectful and not self.inline:
            self._waker.set()
        return batch

    def _deliver_effectful(self) -> None:
        while self.effectful:
            attempt, finish = self.effectful[0]
            deliver(attempt, finish)  # a database error leaves it first in line for the next tick
            self.effectful.popleft()
            self.slots.let_go(attempt)

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
                self._waker.set()
        connections[self.using].close()

    def _flush_until_done(self) -> None:
        """Flush batch after batch while attempts keep finishing; rest when none is left.
        ``busy`` drops before the last look, so a handler finishing in between either is
        seen here or sees the thread idle and kicks it."""
        while True:
            batch = self._take()
            if not batch:
                self._busy = False
                if not self.finished:
                    return
                self._busy = True
                continue
            error = self._flush(batch)
            self._done.put((batch, error))
            batch = None  # resting, keep nothing of this flush's jobs
            self._waker.set()
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
