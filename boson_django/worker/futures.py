"""The futures of running handlers, and the Finish each one ends with.

Pool threads settle a :class:`JobFuture` per sync handler; async handlers have the
``concurrent.futures.Future`` of their event loop. :func:`finish_of` reads either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from boson_django.worker.outcomes import Finish, failure


class JobFuture:
    """The Future of a sync handler's call: what the runtime reads of it and nothing more.

    Holds no Condition or lock: nothing waits on it -- its reader polls ``done()`` once
    its callback has run. The callback is given up front, so no completion can slip in
    between submitting and registering it.
    """

    __slots__ = ("_done", "_value", "_error", "_on_done")

    def __init__(self, on_done: Callable[[JobFuture], None] | None = None):
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._on_done = on_done

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return False

    def exception(self) -> BaseException | None:
        return self._error

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error
        self._done = True  # last: a reader that sees done() sees the value
        if self._on_done is not None:
            self._on_done(self)




def finish_of(future: Future[Finish] | JobFuture, interruption: BaseException | None) -> Finish:
    """The Finish of a done future; a cancelled async handler's is a failure with the
    attempt's ``interruption`` (its timeout, its lost lease)."""
    if type(future) is JobFuture:  # a sync handler's (the loop reads one per job)
        return future._value if future._error is None else failure(future._error)
    if future.cancelled():
        return failure(interruption or asyncio.CancelledError("handler cancelled"))
    exc = future.exception()
    return failure(exc) if exc is not None else future.result()
