"""Graceful shutdown: SIGTERM/SIGINT stop admission, running jobs get a grace period to
finish, the rest are handed back with ``services.release`` and the process exits 0.
SIGHUP (the terminal a worker was started from closing, an SSH session dropping) does the
same: left to its default action it would end the process at once, and every job it ran
would come back after its lease as a crash, counted toward the task's crash limit.

A second signal ends the grace at once (release now). Signal handlers can only be
installed from the main thread; an embedded or test worker is stopped with
:meth:`Shutdown.request` instead.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


class SignalSafeEvent:
    """A ``threading.Event`` that a signal handler may set.

    Python runs a signal handler on the main thread between any two bytecodes, including
    while that thread holds an event's own lock (inside its ``set``, ``wait`` or
    ``clear``). ``threading.Event``'s lock is not reentrant, so a handler calling ``set``
    there waited for its own thread forever: a worker that ignored SIGTERM, its loop
    stuck, seen once in a CI run of the chaos test and reproduced by signalling a loop
    that sets and waits on its waker (tests/worker/test_shutdown_signals.py). Here the
    lock is reentrant: the handler's ``set`` goes through. One thread waits (the loop).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def wait(self, timeout: float | None = None, *, clear: bool = False) -> bool:
        """Wait until set or ``timeout``; whether it was set (and, with ``clear``, unset
        it in the same hold of the lock)."""
        with self._cond:
            if not self._flag:
                self._cond.wait(timeout)
            fired = self._flag
            if clear:
                self._flag = False
            return fired


class Shutdown:
    def __init__(self, grace_ms: int, on_request: Callable[[], None] | None = None):
        self.grace_ms = grace_ms
        self.on_request = on_request
        self.requested = SignalSafeEvent()
        self.deadline: float | None = None
        self.reasons: list[str] = []
        self._previous: dict[int, Any] = {}

    @property
    def stopping(self) -> bool:
        return self.requested.is_set()

    def request(self, reason: str = "requested") -> None:
        """First call: stop admitting, start the grace period. Later calls: end the grace."""
        now = time.monotonic()
        self.reasons.append(reason)  # logged by the loop: logging is not signal-safe
        if not self.requested.is_set():
            self.deadline = now + self.grace_ms / 1000
            self.requested.set()
        else:
            self.deadline = now
        if self.on_request:
            self.on_request()

    def grace_over(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def seconds_left(self) -> float:
        return float("inf") if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)

    def install(self) -> bool:
        """Handle SIGTERM/SIGINT/SIGHUP; False when not on the main thread (nothing installed)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return True

    def uninstall(self) -> None:
        """Restore the previous handlers -- unless a signal is stopping the process: then
        further ones are ignored (SIG_IGN also outlives interpreter finalization), so a
        repeated SIGTERM (a supervisor sending it five times) arriving while the process
        exits cannot turn a clean exit 0 into death by signal."""
        exiting = any(reason.startswith("SIG") for reason in self.reasons)
        for sig, previous in self._previous.items():
            signal.signal(sig, signal.SIG_IGN if exiting else previous)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request(signal.Signals(signum).name)


#: How long a stopped worker's process may take to exit, at least (the grace left, if more).
EXIT_WAIT_S = 2.0


def exit_within(seconds: float, status: int) -> None:
    """A stopped worker's process exits, even if its handlers left a thread running.

    The interpreter waits at exit for non-daemon threads and for the threads of every
    ``ThreadPoolExecutor`` -- asgiref's among them, which runs an async handler's
    ``sync_to_async`` calls: one stuck there kept the process alive after the worker had
    released its jobs and said it stopped, every further SIGTERM ignored. A daemon
    watchdog ends the process if it is still there ``seconds`` later; a normal exit
    ends the watchdog with it."""

    def give_up() -> None:
        stuck = [t.name for t in threading.enumerate() if t not in (threading.current_thread(), threading.main_thread())]
        logging.getLogger("boson_django.worker").warning(
            "boson: the process did not exit within %.1fs of the worker stopping; exiting without the threads "
            "still running (%s)", seconds, ", ".join(stuck))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    watchdog = threading.Timer(min(seconds, 3600.0), give_up)
    watchdog.name, watchdog.daemon = "boson-exit-watchdog", True
    watchdog.start()
