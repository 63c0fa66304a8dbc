"""Prometheus metrics (the ``metrics`` extra: ``pip install 'boson-django[metrics]'``).

Two kinds, one registry (:data:`REGISTRY`):

* **store gauges**, read from the database at scrape time: the same in every process
  (jobs by queue and state, oldest waiting job, paused queues, bucket tokens, duty
  holders, schedules);
* **process counters and histograms**, fed by :mod:`boson_django.transitions` in the
  process that made the transition: admissions, outcomes, attempt durations, wait
  latency, lease losses, reclaims, quarantines. Scrape every worker
  (``boson_worker --metrics-port``) to see them all.

Expose it with ``path("metrics/", include("boson_django.metrics.urls"))`` (behind the
project's own access check: see docs/metrics.md) or ``boson_worker --metrics-port 9108``
(loopback only, unless ``--metrics-addr`` says otherwise). Labels are queue, state,
outcome, rate class, duty and schedule names -- never job ids -- so the series count
does not grow with jobs.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

try:
    from prometheus_client import CollectorRegistry
except ImportError:  # pragma: no cover -- the extra is installed in the test environments
    raise ImproperlyConfigured("boson_django.metrics needs prometheus-client: pip install 'boson-django[metrics]'") from None

REGISTRY = CollectorRegistry(auto_describe=True)

from boson_django.metrics import counters, store  # noqa: E402, F401 -- they register on REGISTRY

__all__ = ["REGISTRY", "exposition", "install", "serve"]


def install() -> None:
    """Start counting this process's transitions (idempotent)."""
    counters.install()


def exposition() -> tuple[bytes, str]:
    """The text exposition of every boson metric, and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    install()
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def serve(port: int, addr: str = "127.0.0.1") -> Any:
    """Serve :data:`REGISTRY` on ``http://addr:port/metrics`` from a daemon thread.

    Returns prometheus-client's ``(server, thread)``. Scrapes read the store one at a
    time (:mod:`boson_django.metrics.server`): parallel scrapes cost one database session.
    The endpoint has no authentication and names workers (``host:pid``): the default
    address, loopback, keeps it to this machine (a local agent scrapes it)."""
    from boson_django.metrics import server

    install()
    return server.start(port, addr, REGISTRY)
