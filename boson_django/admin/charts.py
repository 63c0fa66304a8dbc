"""Server-side SVG line charts: geometry in Python, drawing in a template, no JavaScript."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

WIDTH, HEIGHT = 560, 170
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 10, 22


@dataclass
class Series:
    name: str
    colour: str
    values: list[float | None]
    points: str = ""
    #: Points with no neighbour to draw a line to (a lone bin of data): drawn as dots.
    dots: list[tuple[float, float]] | None = None


@dataclass
class Chart:
    title: str
    unit: str
    series: list[Series]
    width: int = WIDTH
    height: int = HEIGHT
    y_ticks: list[tuple[float, str]] | None = None
    x_ticks: list[tuple[float, str]] | None = None
    empty: bool = False
    left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    plot_bottom: int = HEIGHT - BOTTOM
    top: int = TOP


def nice_max(value: float) -> float:
    """The smallest 1/2/5 x 10^k not below ``value`` (at least 1)."""
    if value <= 1:
        return 1.0
    step = 10 ** (len(str(int(value))) - 1)
    for mult in (1, 2, 5, 10):
        if value <= mult * step:
            return float(mult * step)
    return float(10 * step)


def _alone(values: list[float | None], i: int) -> bool:
    """Whether bin ``i`` has no value on either side: a line through it is a point, which
    a polyline does not draw."""
    return all(j < 0 or j >= len(values) or values[j] is None for j in (i - 1, i + 1))


def line_chart(title: str, unit: str, series: list[Series], start: datetime, bin_span: timedelta, bins: int, label_every: int, fmt: str, y_fmt=lambda v: f"{v:g}") -> Chart:  # type: ignore[no-untyped-def]
    chart = Chart(title, unit, series)
    top_value = max((v for s in series for v in s.values if v is not None), default=0.0)
    chart.empty = top_value == 0
    y_max = nice_max(top_value)
    plot_w = chart.plot_right - chart.left
    plot_h = chart.plot_bottom - chart.top

    def x(i: int) -> float:
        return chart.left + plot_w * i / max(bins - 1, 1)

    def y(v: float) -> float:
        return chart.plot_bottom - plot_h * v / y_max

    for s in series:
        s.points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s.values) if v is not None)
        s.dots = [(round(x(i), 1), round(y(v), 1)) for i, v in enumerate(s.values) if v is not None and _alone(s.values, i)]
    chart.y_ticks = [(round(y(y_max * k / 4), 1), y_fmt(y_max * k / 4)) for k in range(5)]
    chart.x_ticks = [
        (round(x(i), 1), timezone.localtime(start + bin_span * i).strftime(fmt)) for i in range(0, bins, label_every)
    ]
    return chart
