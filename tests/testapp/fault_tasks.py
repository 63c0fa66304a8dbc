"""Tasks of the fault suite (tests/faults/): each leaves evidence a checker can judge.

A handler writes a :class:`StartMark` (job, fence, pid, store time) the moment it starts,
in its own autocommitted statement, so a worker killed mid-job leaves it behind. Its
effect is an :class:`Effect` row registered with ``context.in_ack``: written in the same
transaction as the fenced SUCCESS ack, so it commits if and only if the ack does.

Gates are files in ``folder`` that the test creates; a handler polls for them (and stops
early when the worker asks it to). Files named ``started-<job>-<fence>`` and
``in-ack-<job>-<fence>`` tell the test where a handler is.
"""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import time

from boson_django import clock
from boson_django.compat import task
from tests.testapp.models import Effect, StartMark
from tests.testapp.tasks import wait_for_file

GATE_LIMIT_S = 60.0


def mark_start(context) -> None:
    StartMark.objects.create(job_id=context.job_id, fence=context.fence, pid=os.getpid(), at=clock.now())


def _touch(folder: str, name: str) -> None:
    if folder:
        (pathlib.Path(folder) / name).write_text(str(os.getpid()))


def wait_for_gate(folder: str, gate: str, context=None) -> bool:
    return wait_for_file(pathlib.Path(folder) / gate, context, GATE_LIMIT_S)


def _effect(context, folder: str = "", ack_gate: str = ""):
    job_id, fence = context.job_id, context.fence

    def write() -> None:
        Effect.objects.create(job_id=job_id, fence=fence, at=clock.now())
        if ack_gate:  # hold the ack's transaction open (uncommitted) until the test says go
            _touch(folder, f"in-ack-{job_id}-{fence}")
            wait_for_gate(folder, ack_gate)

    return write


@task(takes_context=True)
def effect(context, folder: str = "", gate: str = "", ack_gate: str = "", value: int = 0) -> int:
    """Start mark; optionally wait at ``gate``; the effect in the ack (held at ``ack_gate``)."""
    mark_start(context)
    _touch(folder, f"started-{context.job_id}-{context.fence}")
    if gate and not wait_for_gate(folder, gate, context):
        return -1  # told to stop: this attempt's ack will be refused anyway
    context.in_ack(_effect(context, folder, ack_gate if context.fence == 1 else ""))
    return value


@task(takes_context=True)
def poison(context) -> None:
    """Kills the worker running it, every time (a segfaulting C extension, an OOM kill)."""
    mark_start(context)
    os.kill(os.getpid(), signal.SIGKILL)


@task(takes_context=True, max_attempts=1)
def fails_once_allowed(context, folder: str = "", gate: str = "") -> None:
    """max_attempts=1: one failure fails it; a crash (kill at ``gate``) must not."""
    mark_start(context)
    _touch(folder, f"started-{context.job_id}-{context.fence}")
    if gate and context.fence == 1:
        wait_for_gate(folder, gate, context)
    raise RuntimeError("handler failure")


@task(takes_context=True, max_attempts=3)
def always_fails(context) -> None:
    mark_start(context)
    raise RuntimeError("always fails")


@task(takes_context=True)
def steps(context, folder: str, count: int = 5, hold_at: int = -1) -> int:
    """Checkpointed steps; each step leaves ``ran-<job>-<step>-<fence>``. The first claim
    waits at step ``hold_at`` (before its checkpoint) for a gate that never opens."""
    mark_start(context)
    step = (context.last_checkpoint or {}).get("step", 0)
    _touch(folder, f"started-{context.job_id}-{context.fence}")
    while step < count:
        _touch(folder, f"ran-{context.job_id}-{step}-{context.fence}")
        if step == hold_at and context.fence == 1:
            wait_for_gate(folder, "never", context)
        step += 1
        context.checkpoint({"step": step})
    context.in_ack(_effect(context))
    return step


@task(takes_context=True)
def sized(context, payload: str) -> int:
    mark_start(context)
    context.in_ack(_effect(context))
    return len(payload)


@task(takes_context=True, max_attempts=2)
def effect_then(context, how: str) -> str:
    """Registers its effect, then ends as ``how`` says: the effect commits only with SUCCESS."""
    mark_start(context)
    context.in_ack(_effect(context))
    if how == "raises":
        raise RuntimeError("failed after registering the effect")
    if how == "skips":
        context.skip("nothing to do")
    if how == "effect-raises":
        context.in_ack(lambda: (_ for _ in ()).throw(ValueError("the effect itself failed")))
    return how


@task(takes_context=True, max_attempts=20, lease_ms=3_000)
def chaos_job(context, work_ms: int, fails_first: bool = False) -> int:
    """bench/chaos.py: busy for ``work_ms`` (checking whether to stop), fails its first
    attempt when asked, and lands its effect in the ack."""
    mark_start(context)
    deadline = time.monotonic() + work_ms / 1000
    while time.monotonic() < deadline and not context.should_stop:
        time.sleep(0.01)
    if fails_first and context.attempt == 1:
        raise RuntimeError("first attempt fails")
    context.in_ack(_effect(context))
    return work_ms


@task(takes_context=True)
def gated(context, folder: str, gate: str, value: int = 0) -> int:
    """Waits at ``gate`` and returns ``value``: a plain success, acked by the worker's flush."""
    mark_start(context)
    _touch(folder, f"started-{context.job_id}-{context.fence}")
    wait_for_gate(folder, gate, context)
    return value


@task()
def connection_parameters() -> dict:
    """The libpq parameters of the connection a handler's thread opens (PostgreSQL)."""
    from django.db import connection

    connection.ensure_connection()
    return connection.connection.info.get_parameters()


@task(takes_context=True)
def chatty(context, lines: int, width: int = 400) -> int:
    """Logs ``lines`` lines of about ``width`` characters each."""
    log = logging.getLogger("tests.faults.chatty")
    for n in range(lines):
        log.warning("line %06d %s", n, "x" * width)
    return lines
