from django.http import HttpResponse
from django.urls import include, path


def checkout(request):
    """A request whose (instrumentation's) span is current while it enqueues."""
    from boson_django import tracing
    from opentelemetry import trace

    from tests.metrics.tasks import traced

    with trace.get_tracer("tests.web", tracer_provider=tracing._provider).start_as_current_span("POST /checkout"):
        result = traced.using(queue_name="traced").enqueue(7)
    return HttpResponse(result.id)


urlpatterns = [path("metrics/", include("boson_django.metrics.urls")), path("checkout/", checkout)]
