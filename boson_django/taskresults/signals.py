"""Send Django's task signals for boson's results.

:func:`send` calls the receivers ``Signal.send`` would, from the result backend's class;
:func:`unheard` says when a signal would reach no one but the Tasks framework's own
logging receivers with their logger silent, so the worker need not build its result.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import weakref
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import Signal, receiver

from boson_django.compat import (
    TASKS_MODULE,
    TaskResultStatus,
    log_task_finished,
    log_task_started,
    task_backends,
    task_finished,
    tasks_logger,
)


def send(signal: Signal, result: Any) -> None:
    """Send one of Django's task signals for ``result``, from its backend's class.

    Calls the receivers ``Signal.send`` would, in its order, without asking the signal
    to resolve them again each time: the task signals cache nothing
    (``use_caching=False``), and resolving them takes a lock, a walk over every
    receiver and weak references dereferenced. The receivers are resolved again whenever the
    signal's list changes (connect, disconnect, a dead receiver cleared); they are
    held weakly, as the signal holds them, and one that died or an async receiver
    sends through ``Signal.send`` itself."""
    sender = _backend_class(result.backend)
    refs = _resolved(signal, sender)[0]
    if refs is None:
        signal.send(sender, task_result=result)
        return
    receivers = [ref() for ref in refs]
    if None in receivers:  # one died: the signal drops it, and this resolves again next time
        _RECEIVERS.pop((signal, sender), None)
        signal.send(sender, task_result=result)
        return
    for receiver_ in receivers:
        receiver_(signal=signal, sender=sender, task_result=result)


def send_finished(result: Any, exception: BaseException | None) -> None:
    """``task_finished`` for ``result``. After a handler's exception it is sent as Django's
    backends send it, from inside the ``except`` handling that exception: receivers see it
    in ``sys.exc_info()``, and Django's logging receiver attaches it to a failure's ERROR
    line (what error monitoring reads). The worker drops its traceback once the outcome is
    settled, sent or not (``Finish.let_go``)."""
    if exception is None:
        send(task_finished, result)
        return
    try:
        raise exception
    except BaseException:  # noqa: BLE001 -- the handler's own, raised again to be the one handled
        send(task_finished, result)


def unheard(signal: Signal, backend_alias: str, level: int = logging.INFO) -> bool:
    """Whether sending ``signal`` now would reach no one: its only receivers are the Tasks
    framework's own logging ones and the framework's logger drops a line at ``level``
    (the level they log a result at: INFO, ERROR for a failed one). The worker then
    builds no TaskResult for it. Any other receiver, or the logger letting the line
    through, and the signal is sent as ever."""
    return _resolved(signal, _backend_class(backend_alias))[1] and not tasks_logger.isEnabledFor(level)


def _log_task_finished(sender: type, task_result: Any, **kwargs: Any) -> None:
    """The backport's ``log_task_finished`` as Django 6 has it. The backport logs a
    failure with ``logger.exception``, assuming the signal is sent inside the ``except``
    that caught the error; a worker sends it after the ack, with no exception active, so
    every failed job logged a stray ``NoneType: None`` line under its own. Sent in its
    place (Django 5.2 only): ERROR for a failure, the exception attached when one is
    active."""
    exc_info = sys.exc_info()
    tasks_logger.log(
        logging.ERROR if task_result.status == TaskResultStatus.FAILED else logging.INFO,
        "Task id=%s path=%s state=%s", task_result.id, task_result.task.module_path, task_result.status,
        exc_info=exc_info if exc_info[0] else None,
    )


def use_django6_finished_logging() -> None:
    """On the backport, put :func:`_log_task_finished` in place of its receiver, for
    every sender and however the signal is sent (``Signal.send`` included, which runs
    the receivers itself when an async one is connected). Sent inside an ``except``,
    as other backends send it, it logs what the backport's did."""
    if TASKS_MODULE == "django_tasks" and task_finished.disconnect(log_task_finished):
        task_finished.connect(_log_task_finished)


#: The receivers the Tasks framework connects to its own signals: they only log.
_FRAMEWORK_LOGGING = frozenset({log_task_started, log_task_finished, _log_task_finished})


def _resolved(signal: Signal, sender: type) -> tuple[list[Any] | None, bool]:
    """The signal's receivers for ``sender`` as weak references (None: leave them to
    ``Signal.send``), and whether each is one of the framework's logging receivers."""
    key = (signal, sender)
    listed = tuple(signal.receivers)
    known = _RECEIVERS.get(key)
    if known is None or known[0] != listed:
        refs = _receiver_refs(signal, sender)
        quiet = refs is not None and all(ref() in _FRAMEWORK_LOGGING for ref in refs)
        known = _RECEIVERS[key] = (listed, refs, quiet)
    return known[1], known[2]


#: (signal, sender) -> (the signal's receivers list as last seen, weak references to the
#: receivers it resolved to for that sender -- None: send through ``Signal.send`` --, and
#: whether they are all the framework's logging receivers).
_RECEIVERS: dict[tuple[Signal, type], tuple[tuple[Any, ...], list[Any] | None, bool]] = {}


def _receiver_refs(signal: Signal, sender: type) -> list[Any] | None:
    sync_receivers, async_receivers = signal._live_receivers(sender)
    if async_receivers:
        return None  # Signal.send runs them (async_to_sync): leave it to it
    try:
        return [weakref.WeakMethod(r) if inspect.ismethod(r) else weakref.ref(r) for r in sync_receivers]
    except TypeError:  # a receiver that cannot be weakly referenced
        return None


@functools.cache
def _backend_class(alias: str) -> type:
    """The sender of the task signals. Cached: ``task_backends[alias]`` goes through a
    thread-local lookup."""
    return type(task_backends[alias])


@receiver(setting_changed)
def _forget_backend_classes(*, setting: str, **kwargs: Any) -> None:
    if setting == "TASKS":
        _backend_class.cache_clear()
