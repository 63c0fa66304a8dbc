"""``boson_worker --reload``: restart the worker when the project's code changes, as
``runserver`` restarts itself -- for development.

Django's own reloader (``autoreload.run_with_reloader``) suits a server, whose requests
are short: on a change its child exits at once, and at Ctrl-C the parent gives the child
a quarter of a second before it kills it. A worker ended like that leaves its jobs
running until their leases expire, and each comes back as a crash, counted toward its
task's crash limit. So here the parent (:func:`supervise`) starts the child again
whenever it exits with Django's reload status, and the child (:func:`watch`) watches the
files with Django's reloader on its main thread while the worker runs on another. On a
change it stops the worker as SIGTERM does -- running jobs finish within the grace or
are released to their queue -- and only then exits to be restarted. A worker that
cannot start (a module of tasks that does not import, a failed system check) waits for
the next change instead of ending the loop.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from types import FrameType

from django.core.management.base import SystemCheckError
from django.utils import autoreload

from boson_django.worker.runtime import Worker
from boson_django.worker.shutdown import SIGNALS

log = logging.getLogger("boson_django.worker")

#: The status Django's reloader exits with when a file changed (``trigger_reload``).
RELOAD_STATUS = 3


def in_child() -> bool:
    """Whether this process is the reloader's child (the one that runs the worker)."""
    return os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true"


def supervise() -> int:
    """The parent: run the command again in a child until it exits other than to be
    restarted; that status is the command's.

    SIGTERM is passed on to the child, once. Ctrl-C (SIGINT) and a closing terminal
    (SIGHUP) reach the child from the terminal itself, which signals its whole foreground
    process group: passed on too, they would reach it twice, and a second signal ends the
    grace at once. The child stays in the terminal's group so that a ``breakpoint()`` in
    a handler can read from it. Either way no child is started after a signal."""
    command = autoreload.get_child_arguments()
    env = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true"}
    child: subprocess.Popen[bytes] | None = None
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if signum == signal.SIGTERM and child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    try:
        while True:
            child = subprocess.Popen(command, env=env, close_fds=False)
            status = child.wait()
            if status != RELOAD_STATUS:
                return status if status >= 0 else 128 - status  # killed by a signal: as a shell reports it
            if stopping:
                return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def watch(worker: Worker, prepare: Callable[[], None]) -> int:
    """The child: run ``prepare`` (the system checks) and the worker on a thread of their
    own while the main thread watches the files; the status to exit with.

    ``worker`` must not handle signals itself (``WorkerOptions.handle_signals=False``):
    handlers are installed here, on the main thread, the only one Python lets install
    them, and they stop the worker as they would have."""
    worker.shutdown.install()
    reloader = autoreload.get_reloader()
    thread = threading.Thread(target=_work, args=(worker, prepare, reloader), name="boson-worker", daemon=True)
    thread.start()
    log.info("boson: watching for file changes with %s", type(reloader).__name__)
    changed: list[str] = []

    def note(file_path: object, **_kwargs: object) -> None:  # None: leaves Django's decision alone
        changed.append(str(file_path))

    autoreload.file_changed.connect(note, weak=False)
    try:
        reloader.run(thread)
    except SystemExit as exit_:  # Django's trigger_reload: a watched file changed
        if exit_.code != RELOAD_STATUS:
            raise
        log.info("boson: %s changed; the worker restarts once its running jobs are done",
                 changed[-1] if changed else "a file")
        worker.stop("code changed")
        thread.join()
        return RELOAD_STATUS
    finally:
        autoreload.file_changed.disconnect(note)
        worker.shutdown.uninstall()
    thread.join()
    return 0


def _work(worker: Worker, prepare: Callable[[], None], reloader: autoreload.BaseReloader) -> None:
    """Run the worker; when it ends, end the watch too. One that cannot start (or fails)
    waits for a change of the files (the one that failed is watched: ``check_errors``)
    or a signal."""
    try:
        autoreload.check_errors(_checked_run)(worker, prepare)
    except SystemCheckError as exc:
        log.error("boson: the worker cannot start; it starts again when a file changes.\n%s", exc)
        worker.shutdown.requested.wait()
    except Exception:
        log.exception("boson: the worker stopped on an error; it starts again when a file changes")
        worker.shutdown.requested.wait()
    reloader.stop()


def _checked_run(worker: Worker, prepare: Callable[[], None]) -> None:
    prepare()
    worker.run()
