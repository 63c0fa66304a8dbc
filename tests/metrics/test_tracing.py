"""A trace started in a request is the parent of the spans of the job it enqueued."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from boson_django import services, tracing
from boson_django.worker import Worker, WorkerOptions

pytestmark = pytest.mark.urls("tests.metrics.urls")


@pytest.fixture
def handler_tasks(settings):
    settings.BOSON = {**settings.BOSON, "TASK_MODULES": [*settings.BOSON["TASK_MODULES"], "tests.metrics.tasks"]}
    import tests.metrics.tasks  # noqa: F401 -- registers the tasks


@pytest.fixture
def spans(handler_tasks):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(None)


def _drain(queue: str) -> None:
    Worker(WorkerOptions(queues=[queue], burst=True, handle_signals=False, concurrency=2)).run()


def _by_name(exporter) -> dict:
    return {s.name: s for s in exporter.get_finished_spans()}


def test_the_requests_trace_is_the_parent_of_the_jobs_spans(client, live_clock, spans):
    job_id = client.post("/checkout/").content.decode()
    _drain("traced")

    found = _by_name(spans)
    request, enqueue = found["POST /checkout"], found["boson.enqueue"]
    attempt, inner = found["boson.attempt tests.metrics.tasks.traced"], found["charge card"]
    trace_id = request.context.trace_id
    assert {s.context.trace_id for s in (enqueue, attempt, inner)} == {trace_id}
    assert enqueue.parent.span_id == request.context.span_id
    assert attempt.parent.span_id == enqueue.context.span_id
    assert inner.parent.span_id == attempt.context.span_id
    assert (enqueue.kind, attempt.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    assert attempt.attributes["boson.job_id"] == job_id and attempt.attributes["boson.fence"] == 1
    assert attempt.attributes["boson.outcome"] == "success"
    envelope, _ = services.job_state(job_id)
    assert envelope.meta["trace_context"]["traceparent"].split("-")[1] == format(trace_id, "032x")


def test_an_async_handlers_attempt_joins_the_trace(live_clock, spans):
    from opentelemetry import trace

    from tests.metrics.tasks import traced_async

    with trace.get_tracer("t", tracer_provider=tracing._provider).start_as_current_span("request") as root:
        traced_async.using(queue_name="traced-async").enqueue(1)
    _drain("traced-async")
    attempt = _by_name(spans)["boson.attempt tests.metrics.tasks.traced_async"]
    assert attempt.context.trace_id == root.get_span_context().trace_id


def test_a_failed_attempt_is_an_error_span_under_the_enqueue_span(live_clock, spans):
    from tests.metrics.tasks import broken

    result = broken.using(queue_name="traced-broken").enqueue()
    envelope, _ = services.job_state(result.id)
    assert envelope.meta["trace_context"]["traceparent"], "the enqueue span itself is the parent"
    _drain("traced-broken")
    attempt = _by_name(spans)["boson.attempt tests.metrics.tasks.broken"]
    assert attempt.status.status_code is StatusCode.ERROR and "card declined" in attempt.status.description
    assert attempt.parent.span_id == _by_name(spans)["boson.enqueue"].context.span_id


def test_with_no_tracer_provider_an_attempt_carries_on_the_trace_it_was_enqueued_under_and_starts_none(
    live_clock, handler_tasks
):
    """No SDK: a job without trace context runs outside any span (none would record); a job
    enqueued under a trace runs under that trace, so what its handler enqueues joins it."""
    from opentelemetry import trace

    from boson_django.services import Envelope
    from tests.metrics.tasks import current_trace

    assert tracing._provider is None and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    parent = "4bf92f3577b34da6a3ce929d0e0e4736"
    (plain,) = services.enqueue([Envelope(task=current_trace.module_path, queue="untraced")])
    (carried,) = services.enqueue([Envelope(
        task=current_trace.module_path, queue="untraced",
        meta={"trace_context": {"traceparent": f"00-{parent}-00f067aa0ba902b7-01"}},
    )])
    _drain("untraced")
    assert services.get_result(plain.id).data == "0" * 32
    assert services.get_result(carried.id).data == parent


def test_an_attempt_failed_for_a_transaction_left_open_is_an_error_span(live_clock, spans):
    """A sync handler that returned inside a transaction fails its attempt: its span said
    ``success`` with an OK status, as it was closed before the open transaction was found."""
    from tests.testapp.tasks import leaves_atomic_open

    leaves_atomic_open.using(queue_name="traced-leak").enqueue()
    _drain("traced-leak")
    attempt = _by_name(spans)["boson.attempt tests.testapp.tasks.leaves_atomic_open"]
    assert attempt.attributes["boson.outcome"] == "retry"
    assert attempt.status.status_code is StatusCode.ERROR
    assert "TransactionLeftOpen" in attempt.status.description


def test_the_enqueue_span_names_the_queue_the_job_went_to(live_clock, spans, settings):
    """An envelope that leaves its queue to the task's configuration (as a schedule's
    does) had an empty ``boson.queue`` on its enqueue span."""
    from boson_django.services import Envelope
    from tests.metrics.tasks import traced

    services.set_task_config(traced.module_path, queue="configured")
    (job,) = services.enqueue([Envelope(task=traced.module_path, args=[1])])
    assert services.job_state(job.id)[0].queue == "configured"
    assert _by_name(spans)["boson.enqueue"].attributes["boson.queue"] == "configured"


def test_an_undecodable_job_has_an_error_attempt_span_in_its_trace(live_clock, spans):
    """A job naming no registered task ends UNDECODABLE without running a handler: it had
    no attempt span, so its trace stopped at the enqueue."""
    from boson_django.models import Job
    from tests.metrics.tasks import traced

    result = traced.using(queue_name="traced-gone").enqueue(1)
    Job.objects.filter(id=result.id).update(task="tests.metrics.tasks.gone")
    _drain("traced-gone")
    attempt = _by_name(spans)["boson.attempt tests.metrics.tasks.gone"]
    assert attempt.attributes["boson.outcome"] == "undecodable"
    assert attempt.status.status_code is StatusCode.ERROR and "not a task this worker can run" in attempt.status.description
    assert attempt.parent.span_id == _by_name(spans)["boson.enqueue"].context.span_id
