"""Tasks that make spans of their own (to show they nest under the attempt's span)."""

from opentelemetry import trace

from boson_django.compat import task

tracer = trace.get_tracer("tests.handler")


@task
def traced(order: int) -> int:
    from boson_django import tracing

    with trace.get_tracer("tests.handler", tracer_provider=tracing._provider).start_as_current_span("charge card"):
        return order


@task
async def traced_async(order: int) -> int:
    return order


@task
def broken() -> None:
    raise ValueError("card declined")


@task
def current_trace() -> str:
    """The trace id the handler runs under ("0" * 32: none)."""
    return format(trace.get_current_span().get_span_context().trace_id, "032x")
