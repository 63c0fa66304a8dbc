"""Recording the Tasks framework's signals in a test: what was sent, and how."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from boson_django.compat import task_enqueued, task_finished, task_started

#: The three task signals, by the name a recorded event carries.
TASK_SIGNALS = (("enqueued", task_enqueued), ("started", task_started), ("finished", task_finished))


class SignalLog:
    """A context manager recording every task signal sent while it is open, each as
    ``row(name, sender, task_result)`` -- what the test wants to compare -- in
    ``events``."""

    def __init__(self, row: Callable[[str, Any, Any], Any]):
        self.row = row
        self.events: list[Any] = []

    def _receiver(self, name: str) -> Callable[..., None]:
        def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
            self.events.append(self.row(name, sender, task_result))
        return receiver

    def __enter__(self) -> SignalLog:
        self.connected = [(signal, self._receiver(name)) for name, signal in TASK_SIGNALS]
        for signal, receiver in self.connected:
            signal.connect(receiver)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signal, receiver in self.connected:
            signal.disconnect(receiver)


@contextmanager
def finished_results() -> Iterator[list[Any]]:
    """The TaskResults ``task_finished`` is sent with while the block runs."""
    heard: list[Any] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        heard.append(task_result)

    task_finished.connect(receiver)
    try:
        yield heard
    finally:
        task_finished.disconnect(receiver)
