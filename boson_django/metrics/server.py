"""The worker's metrics port: prometheus-client's HTTP server, its scrapes read one at a time.

prometheus-client serves each request from a thread of its own, and each thread opened
a database session of its own for the store gauges: N parallel scrapes held N sessions
at once (60 made 63, of a server's default 100), which anyone who could reach the port
could do. Here the scrapes of one process take turns on one lock, and scrapes that
waited while a read ran share the next read, so any number of them costs one session
at a time; each serving thread closes its session once its read is done (the thread ends
with its request).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import connections
from prometheus_client.registry import CollectorRegistry

#: What ``boson_worker --metrics-port`` listens on without ``--metrics-addr``.
DEFAULT_ADDR = "127.0.0.1"


class OneReadAtATime:
    """A registry for prometheus-client's server: ``collect()`` reads ``registry`` under a
    lock, and hands a read that started after the caller asked to every caller waiting
    for it (a scrape never gets values read before it arrived)."""

    def __init__(self, registry: CollectorRegistry):
        self._registry = registry
        self._lock = threading.Lock()
        self._last: tuple[float, list[Any]] | None = None

    def collect(self) -> Iterator[Any]:
        asked = time.monotonic()
        with self._lock:
            if self._last is None or self._last[0] < asked:
                started = time.monotonic()
                self._last = (started, _read(self._registry.collect))
            return iter(self._last[1])

    def restricted_registry(self, names: Iterable[str]) -> _Restricted:
        """``?name[]=...`` scrapes: only those families, read under the same lock."""
        return _Restricted(self._registry.restricted_registry(names), self._lock)


class _Restricted:
    def __init__(self, restricted: Any, lock: threading.Lock):
        self._restricted, self._lock = restricted, lock

    def collect(self) -> Iterator[Any]:
        with self._lock:
            return iter(_read(self._restricted.collect))


def _read(collect: Any) -> list[Any]:
    """Every family ``collect`` yields; then this thread's sessions are closed."""
    try:
        return list(collect())
    finally:
        connections.close_all()


def start(port: int, addr: str, registry: CollectorRegistry) -> Any:
    """prometheus-client's ``(server, thread)`` serving ``registry`` on ``addr:port``."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=addr, registry=OneReadAtATime(registry))  # type: ignore[arg-type]
