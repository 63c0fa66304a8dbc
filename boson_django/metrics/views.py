"""The scrape endpoint. Unauthenticated like any Prometheus target: expose it only where
your scraper can reach it (or wrap :func:`metrics` in your own access check)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from boson_django.metrics import exposition


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    body, content_type = exposition()
    return HttpResponse(body, content_type=content_type)
