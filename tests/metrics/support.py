"""Scrape helpers: the endpoint's text parsed into {(name, labels): value}."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from boson_django import services
from boson_django.services import Outcome
from tests.factories import ADD, NOOP, envelope

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client) -> tuple[Series, dict[str, str]]:
    """Every sample of ``GET /metrics/``, and each family's type."""
    response = client.get("/metrics/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    series: Series = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        types[family.name] = family.type
        for sample in family.samples:
            series[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return series, types


def documented() -> dict[str, tuple[str, set[str]]]:
    """Metric name -> (type, label names) from the table in docs/metrics.md."""
    found = {}
    for line in DOCS.read_text().splitlines():
        match = re.match(r"\|\s*`(boson_[a-z_]+)`\s*\|\s*(\w+)\s*\|\s*([^|]*)\|", line)
        if match:
            labels = {x.strip(" `") for x in match.group(3).split(",") if x.strip(" `—-")}
            found[match.group(1)] = (match.group(2), labels)
    return found


def samples_of(series: Series, metric: str, kind: str) -> list[dict[str, str]]:
    """The label sets scraped for a documented metric (counters and histograms have suffixes)."""
    base = metric.removesuffix("_total") if kind == "counter" else metric
    names = {base, base + "_total", base + "_bucket", base + "_sum", base + "_count", base + "_created"}
    return [dict(labels) for name, labels in series if name in names]


def family_of(metric: str, kind: str) -> str:
    return metric.removesuffix("_total") if kind == "counter" else metric


def run_jobs(count: int, queue: str = "metered") -> None:
    """``count`` jobs through every kind of ending, on the services."""
    ids = [r.id for r in services.enqueue([envelope(NOOP if i % 4 else ADD, queue=queue, args=[] if i % 4 else [1, i],
                                                    max_attempts=1 if i % 5 == 0 else 3) for i in range(count)])]
    units = services.admit("metrics-worker", [queue], count)
    assert len(units) == len(ids)
    for i, unit in enumerate(units):
        if i % 7 == 0:
            services.cancel(unit.lease.job_id)
        elif i % 3 == 0:
            services.ack(unit.lease, Outcome.RETRY, error="boom")
        else:
            services.ack(unit.lease, Outcome.SUCCESS)
