"""The threads handlers run on: a pool of daemon threads for sync handlers, one
event-loop thread for async ones.

Daemon threads rather than ``ThreadPoolExecutor``: a handler that ignores every request
to stop must not keep the process alive after shutdown has released its job
(``ThreadPoolExecutor`` joins its threads at interpreter exit).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from boson_django.worker import network
from boson_django.worker.futures import JobFuture


class DaemonPool:
    """A fixed set of daemon threads taking calls from one queue."""

    def __init__(self, size: int, name: str):
        self.calls: queue.SimpleQueue[tuple[Callable[[], Any], JobFuture] | None] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True) for i in range(size)]
        for thread in self.threads:
            thread.start()

    def submit(self, fn: Callable[[], Any], future: JobFuture) -> None:
        """Run ``fn`` on a pool thread, settling ``future``: made by the caller, so that it
        is where the caller keeps it before the call can end (another thread may read it
        as soon as its callback runs)."""
        self.calls.put((fn, future))

    def _serve(self) -> None:
        network.harden_all()  # the connections handlers open here: a connect timeout, keepalives
        while (item := self.calls.get()) is not None:
            self._call(*item)
            item = None  # a thread waiting for its next call keeps nothing of the last job

    @staticmethod
    def _call(fn: Callable[[], Any], future: JobFuture) -> None:
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 -- delivered to the waiter
            future.settle(error=exc)
        else:
            future.settle(value)

    def shutdown(self) -> None:
        for _ in self.threads:
            self.calls.put(None)


class LoopThread:
    """One asyncio event loop on a daemon thread, for every async handler."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro: Any) -> Future[Any]:
        """Run ``coro`` as a task on the loop; the Future's ``boson_cancel`` cancels it."""
        handle = _TaskHandle(self.loop)
        future = asyncio.run_coroutine_threadsafe(handle.run(coro), self.loop)
        future.boson_cancel = handle.cancel  # type: ignore[attr-defined]
        return future

    def shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class _TaskHandle:
    """Cancels a handler's task on the event loop, so that its Future ends only when the
    handler's coroutine does. Cancelling the Future itself ended it at once, whatever the
    coroutine did next: a handler that caught the cancellation and went on running had
    its slot counted free, and the worker started more jobs than its concurrency."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.task: asyncio.Task[Any] | None = None
        self.asked = False

    async def run(self, coro: Any) -> Any:
        self.task = asyncio.current_task()
        if self.asked:  # cancelled before the task took its first step
            self.task.cancel()  # type: ignore[union-attr]
        try:
            return await coro
        finally:
            self.task = None

    def cancel(self) -> None:
        """Safe from any thread."""
        self.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        self.asked = True
        if self.task is not None:
            self.task.cancel()
