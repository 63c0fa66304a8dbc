"""Where the loop's acks are flushed: on PostgreSQL, a thread of its own.

The loop's tick used to ack what finished and then admit more, each a round trip to
the database while the other side waited: the worker's CPU idle during one, the
database's during the other. On PostgreSQL the flush runs on this thread, with its own
connection, while the loop admits and starts the next jobs; one flush is in flight at a
time, so the attempts finishing meanwhile make the next, larger, batch. SQLite takes
one writer at a time, so there the flush stays in the loop (``inline``).

A flush on the thread that fails on the database hands its attempts back unsettled:
the loop flushes them again, as it did when the flush was its own (inline, the error
propagates to the loop's reconnect and backoff, as before). Any other error is
re-raised in the loop.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence

from django.db import DatabaseError, InterfaceError, connections

from boson_django.services import _db
from boson_django.worker.attempt import Attempt
from boson_django.worker.completer import complete
from boson_django.worker.outcomes import Finish

log = logging.getLogger("boson_django.worker")

Batch = Sequence[tuple[Attempt, Finish]]


class Acker:
    def __init__(self, using: str, *, inline: bool, on_flushed: Callable[[], None] | None = None):
        self.using = using
        self.inline = inline
        self._on_flushed = on_flushed
        self._todo: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[tuple[Batch, BaseException | None]] = queue.SimpleQueue()
        self._busy = False
        self._thread: threading.Thread | None = None
        self._returned: list[Attempt] = []

    @property
    def busy(self) -> bool:
        """A flush is in flight (its attempts are ``acking``)."""
        return self._busy

    def submit(self, batch: Batch) -> None:
        for attempt, _ in batch:
            attempt.acking = True
        self._busy = True
        if self.inline:
            try:
                complete(batch, self.using)
            except BaseException:
                self._hand_back(batch)
                raise
            self._done.put((batch, None))
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="boson-acker", daemon=True)
            self._thread.start()
        self._todo.put(batch)

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
                self._ended(batch)
                acked += [attempt for attempt, _ in batch]
                continue
            self._hand_back(batch)
            if not isinstance(error, (DatabaseError, InterfaceError)):
                raise error
            log.warning("boson: flushing %d acks failed; they are retried", len(batch), exc_info=error)

    def handed_back(self) -> list[Attempt]:
        """The attempts of flushes that failed, unsettled, since the last call: the loop
        acks them again."""
        returned, self._returned = self._returned, []
        return returned

    def _ended(self, batch: Batch) -> None:
        self._busy = False
        for attempt, _ in batch:
            attempt.acking = False

    def _hand_back(self, batch: Batch) -> None:
        self._ended(batch)
        self._returned += [attempt for attempt, _ in batch]

    def stop(self, timeout_s: float) -> None:
        """Let the flush in flight end (within ``timeout_s``), then end the thread."""
        if self._thread is None:
            return
        self._todo.put(None)
        self._thread.join(timeout_s)

    def _serve(self) -> None:
        _db.dedicate(connections[self.using])  # this thread's connection runs only the flushes
        while (batch := self._todo.get()) is not None:
            self._done.put((batch, self._flush(batch)))
            batch = None  # waiting for the next flush, keep nothing of this one's jobs
            if self._on_flushed is not None:
                self._on_flushed()
        connections[self.using].close()

    def _flush(self, batch: Batch) -> BaseException | None:
        try:
            complete(batch, self.using)
        except (DatabaseError, InterfaceError) as exc:
            _db.close_quietly(self.using)
            return exc
        except Exception as exc:  # noqa: BLE001 -- re-raised in the loop
            return exc
        return None
