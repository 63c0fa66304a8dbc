"""The dashboard's charts draw every point they have: one bin of data is a dot, where a
polyline of one point drew nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from django.urls import reverse

from boson_django import services
from boson_django.admin import charts
from boson_django.services import Outcome
from tests.factories import admit_one, enqueue_one

START = datetime(2030, 1, 1, tzinfo=timezone.utc)


def chart(values: list[float | None]) -> charts.Chart:
    series = [charts.Series("p50", "#2f7ebc", values)]
    return charts.line_chart("wait", "ms", series, START, timedelta(minutes=1), len(values), 10, "%H:%M")


def test_one_point_is_drawn_as_a_dot():
    (series,) = chart([None, None, 40.0, None]).series
    assert len(series.dots) == 1 and series.dots[0][1] < charts.HEIGHT - charts.BOTTOM, "drawn above the axis"
    assert series.points.count(",") == 1


def test_points_with_a_neighbour_are_a_line_not_dots():
    (series,) = chart([10.0, 20.0, None, 5.0]).series
    assert len(series.dots) == 1, "only the last, which has no neighbour"
    assert series.points.count(",") == 3


@pytest.mark.django_db
def test_the_wait_chart_of_a_store_with_one_finished_job_draws_it(superuser_client, store_clock):
    enqueue_one(queue="once")
    services.ack(admit_one("w1", ["once"]).lease, Outcome.SUCCESS)
    body = superuser_client.get(reverse("admin:boson_django_dashboard_changelist")).content.decode()
    assert body.count('<circle class="boson-dot"') >= 2, "p50 and p95 of the hour's wait chart"
