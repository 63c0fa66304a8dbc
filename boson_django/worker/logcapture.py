"""Capture a handler's ``logging`` output per attempt, for that attempt's record.

One handler sits on the root logger for the life of the worker. It routes each record
to the buffer of the attempt that emitted it, found through a context variable: each
sync handler runs with the variable set in its pool thread, each async handler in its
own asyncio task context, so concurrent jobs never see each other's lines. Records
emitted outside an attempt (the worker's own logging) are ignored, and so are the Tasks
framework's lifecycle lines (``django.tasks``, ``django_tasks``).

It captures what the logging configuration lets through to the root logger, at or
above ``BOSON["LOG_CAPTURE_LEVEL"]``. Buffers are bounded: the newest lines are kept
and the count of dropped ones is reported (the services bound the stored size again).

Each line starts with its store time in UTC (:meth:`Buffer.stamp`), so the lines of an
attempt agree with its start and end, which the store stamps, whatever the worker's
own clock says.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from contextvars import ContextVar
from datetime import timedelta, timezone
from typing import Any

from boson_django.services.history import MAX_LOG_LINES, dropped_marker

MAX_LINE_CHARS = 4_000


class Buffer:
    """The lines of one attempt: the newest ``MAX_LOG_LINES`` kept. The deque is made at
    the first line: most attempts log nothing, and one is made per attempt. ``origin``
    is the attempt (its ``admitted_at`` on the store clock and ``admitted_mono`` on this
    process's monotonic clock), held weakly: the attempt holds its buffer, and a cycle
    would keep both until the collector ran. None stamps no time."""

    __slots__ = ("lines", "seen", "origin")

    def __init__(self, origin: Any = None) -> None:
        self.lines: deque[str] | None = None
        self.seen = 0
        self.origin = None if origin is None else weakref.ref(origin)

    def stamp(self) -> str:
        """The store time now, to the millisecond, in UTC: the admission's store time plus
        the time since, which this process's clock only measures (a clock minutes off
        measures seconds as well as any)."""
        attempt = self.origin() if self.origin is not None else None
        if attempt is None:
            return ""
        at = attempt.admitted_at.astimezone(timezone.utc) + timedelta(seconds=time.monotonic() - attempt.admitted_mono)
        return f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond // 1000:03d} UTC "

    def add(self, line: str) -> None:
        if self.lines is None:
            self.lines = deque(maxlen=MAX_LOG_LINES)
        self.seen += 1
        self.lines.append(line[:MAX_LINE_CHARS])

    def collect(self) -> list[str]:
        if self.lines is None:
            return []
        kept = list(self.lines)
        dropped = self.seen - len(kept)
        return ([dropped_marker(dropped)] if dropped else []) + kept


_current: ContextVar[Buffer | None] = ContextVar("boson_log_buffer", default=None)


#: The Tasks framework's own loggers: its ``Task id=... state=RUNNING`` line comes from the
#: ``task_started`` signal the worker sends inside the attempt. It describes the attempt
#: rather than being its output, and Django 6's ``django.tasks`` logs it at INFO through the
#: ``django`` logger, so without this every attempt would carry a line (and every plain
#: success would take the slower ack path, which stores log lines).
_FRAMEWORK = ("django.tasks", "django_tasks")


def _from_framework(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in _FRAMEWORK)


class _RouteToAttempt(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        buffer = _current.get()
        if buffer is None or _from_framework(record.name):
            return
        try:
            buffer.add(buffer.stamp() + self.format(record))
        except Exception:  # a broken record must never fail the job
            self.handleError(record)


#: After the line's store time (``Buffer.stamp``): not ``asctime``, this process's own clock.
_FORMAT = "%(levelname)s %(name)s: %(message)s"
_lock = threading.Lock()
_installed: _RouteToAttempt | None = None
_users = 0


def install(level: int) -> None:
    """Attach the routing handler to the root logger (reference counted)."""
    global _installed, _users
    with _lock:
        _users += 1
        if _installed is None:
            _installed = _RouteToAttempt(level)
            _installed.setFormatter(logging.Formatter(_FORMAT))
            logging.getLogger().addHandler(_installed)


def uninstall() -> None:
    global _installed, _users
    with _lock:
        _users = max(_users - 1, 0)
        if _users == 0 and _installed is not None:
            logging.getLogger().removeHandler(_installed)
            _installed = None


class capturing:  # lower case: used like the context-manager function it replaced
    """Route this context's log records to a fresh buffer until the block ends. A class
    rather than ``@contextmanager``: entered once per job, it builds no generator."""

    __slots__ = ("buffer", "_token")

    def __init__(self, origin: Any = None) -> None:
        self.buffer = Buffer(origin)

    def __enter__(self) -> Buffer:
        self._token = _current.set(self.buffer)
        return self.buffer

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)

