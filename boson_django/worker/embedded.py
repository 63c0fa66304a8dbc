"""Embedded mode: a worker thread inside the web process, for small deployments.

Opt in with ``BOSON["EMBEDDED_WORKER"] = True`` (started with the first request the
process serves) or by calling :func:`start` yourself. It is the same runtime as
``manage.py boson_worker``.

Caveats -- read before using it:

* Every web process started this way runs its own worker: with N gunicorn workers you get
  N boson workers (fine: leases keep them from running a job twice, but size
  ``CONCURRENCY`` accordingly).
* Handlers share the web process's CPU, memory and GIL: a heavy job slows requests.
* There are no signal handlers in a thread: the web server's shutdown does not wait for
  jobs. :func:`stop` (also registered with ``atexit``) releases running jobs after the
  grace period; a hard kill leaves leases that the reclaim sweep recovers after
  ``LEASE_MS`` (counted as a crash, not an attempt).
* It starts with the process's first request, so only in processes that serve requests:
  not in management commands (``migrate``, ``shell``...), the auto-reloader's parent, a
  script that calls ``django.setup()`` (which could end with a job half-run: a crash), nor
  a test run (Django's test environment is set up: requests from the test client do not
  start it). Use ``boson_worker`` for anything beyond light work.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from django.core import mail
from django.core.signals import request_started

from boson_django import conf
from boson_django.worker.runtime import Worker, WorkerOptions

_lock = threading.Lock()
_state: dict[str, object] = {}


def start(options: WorkerOptions | None = None) -> Worker:
    """Start the embedded worker thread once per process; returns the running Worker."""
    with _lock:
        current = _state.get("worker")
        if isinstance(current, Worker):
            return current
        opts = options or WorkerOptions()
        opts.handle_signals = False
        worker = Worker(opts)
        thread = threading.Thread(target=_serve, args=(worker,), name="boson-embedded", daemon=True)
        _state.update(worker=worker, thread=thread)
        thread.start()
        atexit.register(stop)
        return worker


def _serve(worker: Worker) -> None:
    from django.apps import apps
    from django.db import connections

    while not apps.ready and not worker.shutdown.stopping:  # started from AppConfig.ready
        worker.shutdown.requested.wait(0.05)
    try:
        worker.run()
    finally:
        connections.close_all()


def stop(timeout: float | None = None) -> None:
    """Stop the embedded worker gracefully and wait for its thread."""
    with _lock:
        worker, thread = _state.pop("worker", None), _state.pop("thread", None)
    if isinstance(worker, Worker) and isinstance(thread, threading.Thread):
        worker.stop()
        thread.join(timeout if timeout is not None else worker.shutdown.grace_ms / 1000 + 5)


def should_autostart() -> bool:
    """The setting is on and this process may serve web requests: not a management
    command other than ``runserver``, nor ``runserver``'s auto-reloader parent."""
    if not conf.get().EMBEDDED_WORKER:
        return False
    launcher = os.path.basename(sys.argv[0]) if sys.argv else ""
    is_cli = launcher in ("manage.py", "django-admin", "__main__.py")
    command = sys.argv[1] if is_cli and len(sys.argv) > 1 else None
    if command is not None and command != "runserver":
        return False
    # runserver serves from the reloader's child (RUN_MAIN), or from itself with --noreload
    # (no reloader: it started no worker at all, and its jobs waited for none).
    return command != "runserver" or os.environ.get("RUN_MAIN") == "true" or "--noreload" in sys.argv


def start_with_first_request() -> None:
    """Start the worker when this process serves its first request (``AppConfig.ready``
    calls this when :func:`should_autostart`). Deciding at start-up from the command
    line alone took any other process that sets Django up -- ``pytest``, a script -- for
    a web server, and started a worker there that claimed jobs and died with it."""
    request_started.connect(_first_request, dispatch_uid=_FIRST_REQUEST)


_FIRST_REQUEST = "boson_django.worker.embedded.first_request"


def _first_request(**_: object) -> None:
    if in_test_environment():
        return  # the test client's requests: tests start a worker themselves if they want one
    request_started.disconnect(dispatch_uid=_FIRST_REQUEST)
    start()


def in_test_environment() -> bool:
    """Django's test environment is set up (its runner, pytest-django): it gives
    ``django.core.mail`` an ``outbox`` until it is torn down."""
    return hasattr(mail, "outbox")
