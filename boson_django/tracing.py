"""OpenTelemetry spans around enqueue and each attempt (the ``otel`` extra).

``boson.enqueue`` (PRODUCER) wraps :func:`boson_django.services.enqueue` and writes its
trace context into each job's ``meta["trace_context"]`` with the configured propagator
(W3C ``traceparent`` by default). ``boson.attempt <task>`` (CONSUMER) wraps each attempt
on the worker with that context as its parent, so a trace started by a request runs on
into the job it enqueued. Without the OpenTelemetry API installed every helper is a
no-op; without an SDK the API's spans record nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from typing import Any

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover -- the extra is installed in the test environments
    trace = None  # type: ignore[assignment]

META_KEY = "trace_context"
#: Outcomes that mean the handler failed (the span's status is ERROR).
FAILED = {"retry", "discard", "undecodable"}
_provider: Any = None


def use_tracer_provider(provider: Any) -> None:
    """Send boson's spans to ``provider`` instead of the global one (``None``: global again)."""
    global _provider
    _provider = provider


def _tracer() -> Any:
    return trace.get_tracer("boson_django", tracer_provider=_provider)


def enqueue_span(batch: list[Any]) -> AbstractContextManager[list[Any]]:
    """Yields the batch with the span's context in each envelope's meta; the batch as it
    is when no span would be seen (:func:`_silent`: a ``nullcontext``, which costs a
    one-job enqueue a microsecond less than a generator's context manager)."""
    if trace is None or not batch or _silent():
        return nullcontext(batch)
    return _enqueue_span(batch)


@contextmanager
def _enqueue_span(batch: list[Any]) -> Iterator[list[Any]]:
    first = batch[0]
    attributes = {"messaging.batch.message_count": len(batch), "boson.task": str(getattr(first, "task", "")),
                  "boson.queue": str(getattr(first, "queue", None) or "")}
    with _tracer().start_as_current_span("boson.enqueue", kind=SpanKind.PRODUCER, attributes=attributes):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        yield [_with_context(e, carrier) for e in batch] if carrier else batch


def enqueued(rows: list[dict[str, Any]]) -> None:
    """Name on the enqueue span the queue the first job went to: an envelope that left it
    to the task's configuration had none when the span began."""
    if trace is None or not rows:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("boson.queue", str(rows[0].get("queue") or ""))


def _silent() -> bool:
    """Nobody would see the span: no tracer provider was set (the API's proxy with no SDK
    behind it makes non-recording spans) and no span is current (so there is no context
    to hand on either). Then the span and the injection would change nothing, and they
    cost more than a one-job enqueue's own Python work."""
    return (
        _provider is None
        and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        and not trace.get_current_span().get_span_context().is_valid
    )


def _untraced(attempt: Any) -> bool:
    """No span would record and the job brought no trace context to carry on into what its
    handler enqueues: the span would change nothing, and costs CPU per attempt."""
    meta = attempt.unit.envelope.meta
    return _silent() and not (isinstance(meta, dict) and META_KEY in meta)


def _with_context(envelope: Any, carrier: dict[str, str]) -> Any:
    meta = getattr(envelope, "meta", None)
    if not isinstance(meta, dict) or META_KEY in meta:
        return envelope  # bad input is enqueue's to refuse; an explicit context is kept
    return replace(envelope, meta={**meta, META_KEY: dict(carrier)})


@contextmanager
def _attempt_span(attempt: Any) -> Iterator[Any]:
    unit = attempt.unit
    meta = unit.envelope.meta if isinstance(unit.envelope.meta, dict) else {}
    carrier = meta.get(META_KEY)
    parent = propagate.extract(carrier) if isinstance(carrier, dict) else None
    attributes = {"boson.job_id": unit.lease.job_id, "boson.queue": unit.envelope.queue or "",
                  "boson.task": unit.envelope.task, "boson.fence": unit.lease.fence, "boson.attempt": unit.attempt + 1}
    with _tracer().start_as_current_span(f"boson.attempt {unit.envelope.task}", context=parent,
                                         kind=SpanKind.CONSUMER, attributes=attributes) as span:
        yield span


def _finished(span: Any, finish: Any) -> Any:
    outcome = str(getattr(finish.outcome, "value", finish.outcome))
    span.set_attribute("boson.outcome", outcome)
    if outcome in FAILED:
        span.set_status(Status(StatusCode.ERROR, (getattr(finish, "error", None) or "").split("\n", 1)[0][:200]))
    return finish


def around_attempt(attempt: Any, run: Callable[[], Any]) -> Any:
    """Run a sync attempt inside its span; returns its Finish."""
    if trace is None or _untraced(attempt):
        return run()
    with _attempt_span(attempt) as span:
        return _finished(span, run())


async def around_attempt_async(attempt: Any, run: Awaitable[Any]) -> Any:
    """Await an async attempt inside its span; returns its Finish."""
    if trace is None or _untraced(attempt):
        return await run
    with _attempt_span(attempt) as span:
        return _finished(span, await run)
