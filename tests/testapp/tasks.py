"""Tasks the suite enqueues; plain Django ``@task`` with boson as the backend."""

import sys

from boson_django.compat import task


@task
def noop() -> None:
    return None


@task
def add(a: int, b: int) -> int:
    return a + b


@task(max_attempts=3, rate_class="smtp", weight=2)
def send_mail(to: str) -> str:
    return f"sent to {to}"


@task(retention_ms=0)
def ephemeral() -> None:
    return None


@task(unique_key="reindex")
def rebuild_index() -> None:
    return None


@task(unique_key=lambda region: f"report:{region}")
def report_for(region: str) -> str:
    return region


# -- tasks the worker tests run (tests/worker/) -------------------------------------------

import logging  # noqa: E402
import pathlib  # noqa: E402
import time  # noqa: E402

worker_log = logging.getLogger("tests.worker")


@task
def fail(message: str) -> None:
    worker_log.warning("about to fail: %s", message)
    raise ValueError(message)


@task
async def async_add(a: int, b: int) -> int:
    return a + b


@task(takes_context=True)
def inspect_context(context, tag: str) -> dict:
    context.progress(1, 2, "half way")
    context.output({"tag": tag})
    context.checkpoint({"step": 1})
    return {"attempt": context.attempt, "job_id": context.job_id, "checkpoint": context.last_checkpoint}


@task(takes_context=True)
def chooses(context, outcome: str) -> str:
    """Asks for an outcome through its context; runs to success on a second attempt."""
    if context.last_checkpoint == "again":
        return "second run"
    if outcome == "snooze":
        context.checkpoint("again")
        context.snooze(5_000)
    if outcome == "skip":
        context.skip("nothing to do")
    if outcome == "discard":
        context.discard("bad input")
    if outcome == "retry":
        context.checkpoint("again")
        context.retry(3_000, "partner busy")
    if outcome == "rate_limited":
        context.checkpoint("again")
        context.rate_limited(2_000)
    return "no choice"


def wait_for_file(path: pathlib.Path, context=None, limit_s: float = 30.0) -> bool:
    """Poll for a file the test creates; False if the worker asked the handler to stop first."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if context is not None and context.should_stop:
            return False
        time.sleep(0.01)
    raise TimeoutError(f"{path} never appeared")


@task(takes_context=True)
def gated(context, folder: str, value: int = 0) -> int:
    """Says it started (a file), then waits for the test's go-ahead file."""
    here = pathlib.Path(folder)
    (here / f"started-{context.job_id}-{context.attempt}").write_text(str(context.attempt))
    wait_for_file(here / "go", context)
    (here / f"finished-{context.job_id}").write_text(str(value))
    return value


@task
def waits_blind(folder: str) -> str:
    """Says it started, then waits for the test's go-ahead file without ever asking its
    context whether to stop: a handler that does not notice a cancel."""
    here = pathlib.Path(folder)
    (here / f"started-{time.monotonic_ns()}").write_text("1")
    for _ in range(3_000):
        if (here / "go").exists():
            return "done"
        time.sleep(0.01)
    raise TimeoutError("never told to go")


@task(takes_context=True)
def gated_steps(context, folder: str, steps: int = 3) -> int:
    """Checkpoints each step; blocks before the last one until the go-ahead file exists."""
    here = pathlib.Path(folder)
    step = (context.last_checkpoint or {}).get("step", 0)
    (here / f"started-{context.job_id}-{context.attempt}").write_text(str(step))
    while step < steps:
        if step == steps - 1:
            wait_for_file(here / "go", context)
        step += 1
        context.checkpoint({"step": step})
        context.progress(step, steps)
    return step


@task(timeout_ms=1_000, max_attempts=1)
def takes_store_time(ms: int) -> str:
    """Spends ``ms`` of store time (a frozen clock, stepped): past its timeout from 1,000."""
    from boson_django import clock

    clock.advance(ms)
    return "done"


@task(takes_context=True, timeout_ms=1_000)
def overruns(context, folder: str) -> str:
    here = pathlib.Path(folder)
    (here / f"started-{context.job_id}").write_text("1")
    worker_log.warning("started, will overrun")
    stopped = not wait_for_file(here / "never", context)
    (here / f"stopped-{context.job_id}").write_text(str(stopped))
    context.progress(1)  # raises: the attempt was already acked as timed out
    return "unreachable"


@task
def returns_set(x: int) -> set:
    return {x}


@task
def stamp(folder: str, n: int) -> None:
    """Writes the wall time it started at (bench/wakeup_latency.py)."""
    (pathlib.Path(folder) / f"start-{n}").write_text(repr(time.time()))


#: The connection wrapper each ``reads_store`` job used (its pool thread's own).
SEEN_CONNECTIONS: list = []


@task
def reads_store() -> int:
    """Touches the database from the handler's thread and records that thread's connection."""
    from django.db import connections

    from boson_django.models import Job

    SEEN_CONNECTIONS.append(connections["default"])
    return Job.objects.count()


@task
def state_of(job_id: str) -> str:
    """Another job's state as this handler sees it when it starts."""
    from boson_django.models import Job

    return Job.objects.get(id=job_id).state


@task
def gc_threshold() -> int:
    """The garbage collector's first threshold as the handler sees it."""
    import gc

    return gc.get_threshold()[0]


@task
def exits(code: int) -> None:
    """The handler's own ``sys.exit()``: its job fails, the worker goes on."""
    sys.exit(code)


@task
async def async_exits(code: int) -> None:
    sys.exit(code)


@task
async def async_interrupts() -> None:
    """Only the handler itself can raise this on the event loop's thread."""
    raise KeyboardInterrupt


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be described")


@task
def raises_unprintable() -> None:
    raise Unprintable()


# -- handlers that misuse their connection or ignore being told to stop -------------------


@task
def leaves_atomic_open() -> int:
    """Enters a transaction and never leaves it (as a generator kept alive would)."""
    from django.db import transaction

    from boson_django.models import Job

    transaction.atomic().__enter__()
    return Job.objects.count()



@task
async def async_ignores_cancel(folder: str) -> str:
    """Says it started, then waits for the go-ahead file, swallowing every cancellation."""
    import asyncio

    here = pathlib.Path(folder)
    (here / f"started-{time.monotonic_ns()}").write_text("1")
    while not (here / "go").exists():
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            (here / "cancel-ignored").write_text("1")
    (here / f"finished-{time.monotonic_ns()}").write_text("1")
    return "done"


@task
async def async_waits_in_a_thread(folder: str) -> str:
    """Says it started, then waits for the go-ahead file in a sync call (``sync_to_async``)."""
    from asgiref.sync import sync_to_async

    here = pathlib.Path(folder)
    (here / f"started-{time.monotonic_ns()}").write_text("1")
    await sync_to_async(wait_for_file)(here / "go", None, 600.0)
    return "done"




@task
async def async_leaves_atomic_open() -> int:
    """:func:`leaves_atomic_open` through ``sync_to_async``, on asgiref's thread."""
    from asgiref.sync import sync_to_async

    return await sync_to_async(leaves_atomic_open.func)()


@task
async def async_reads_store() -> int:
    """:func:`reads_store` through ``sync_to_async``."""
    from asgiref.sync import sync_to_async

    return await sync_to_async(reads_store.func)()


@task(takes_context=True, rate_class="metered", weight=5)
def reports_weight(context, actual: float) -> float:
    """Charged its estimate (5 tokens) at admission; tells the worker what it really cost."""
    context.report_weight(actual)
    return actual


@task(takes_context=True)
def fails_after_losing_its_lease(context) -> None:
    """Its lease is taken from it (as a reclaim does), then it raises: the ack is refused."""
    from django.db.models import F

    from boson_django.models import Job

    Job.objects.filter(id=context.task_result.id).update(fence=F("fence") + 1)
    raise ValueError("too late")
