"""The geometry of the dashboard's charts: deliveries and failures per second, and latency,
per minute over the last hour (workly/delivery_stats.py), as numbers an SVG template
(templates/chart_macros.html) draws. Server-rendered: no JavaScript, nothing to build.

Rates are per second over the minute (the current minute: over its seconds so far).
Latency is the p50 and p95 of each minute's attempts, from its duration buckets: a bucket's
upper bound, so "p95 ≤ 250 ms" reads as an upper bound too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from workly.delivery_stats import MinuteStats

WIDTH, HEIGHT = 640, 150
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 10, 22  # the plot's margins: labels go there
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


@dataclass(frozen=True, slots=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True, slots=True)
class XLabel:
    x: float
    label: str
    anchor: str  # SVG text-anchor


@dataclass(frozen=True, slots=True)
class Bar:
    """One minute of the deliveries chart: succeeded below, failures stacked on top."""

    minute: str  # its start, ISO 8601 UTC
    x: float
    width: float
    ok_y: float
    ok_height: float
    fail_y: float
    fail_height: float
    succeeded: int
    failures: int  # retried + failed for good
    title: str


@dataclass(frozen=True, slots=True)
class Point:
    minute: str
    x: float
    y: float
    ms: float
    over: bool  # the attempts took more than ``ms`` (the last bucket has no upper bound)

    @property
    def bound(self) -> str:
        return f"{'>' if self.over else '≤'} {self.ms:g} ms"


@dataclass(frozen=True, slots=True)
class Line:
    name: str  # "p50", "p95"
    segments: list[str]  # SVG polyline points; a minute without attempts breaks the line
    points: list[Point]


@dataclass(frozen=True, slots=True)
class Chart:
    # The template's canvas, where it draws the grid lines and the minutes' labels.
    width: ClassVar[int] = WIDTH
    height: ClassVar[int] = HEIGHT
    grid_from: ClassVar[float] = LEFT
    grid_to: ClassVar[float] = WIDTH - RIGHT
    label_y: ClassVar[float] = HEIGHT - 6

    ticks: list[Tick]
    x_labels: list[XLabel]
    bars: list[Bar]
    lines: list[Line]
    empty: bool  # nothing to show in the whole hour


@dataclass(frozen=True, slots=True)
class DeliveryCharts:
    deliveries: Chart
    latency: Chart


def charts_for(minutes: Sequence[MinuteStats], now: datetime) -> DeliveryCharts:
    """Both charts of one queue's or endpoint's minutes (Service.delivery_history)."""
    return DeliveryCharts(deliveries_chart(minutes, now), latency_chart(minutes))


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times 10^k at or above ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value * (1 - 1e-9))


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _x_labels(minutes: Sequence[MinuteStats]) -> list[XLabel]:
    slot = PLOT_W / len(minutes)
    picks = [(0, "start"), (len(minutes) // 2, "middle"), (len(minutes) - 1, "end")]
    return [
        XLabel(LEFT + slot * (index + (0 if anchor == "start" else 1 if anchor == "end" else 0.5)),
               minutes[index].minute.strftime("%H:%M"), anchor)
        for index, anchor in picks
    ]  # fmt: skip


def _ticks(top: float, unit: str) -> list[Tick]:
    return [Tick(TOP + PLOT_H * (1 - share), f"{_number(top * share)}{unit}") for share in (0, 0.5, 1)]


def _seconds_of(stats: MinuteStats, now: datetime) -> float:
    """The seconds a minute's rate is over: 60, or those so far of the current minute."""
    return min(60.0, max(1.0, (now - stats.minute).total_seconds()))


def deliveries_chart(minutes: Sequence[MinuteStats], now: datetime) -> Chart:
    rates = [
        (m.succeeded / _seconds_of(m, now), (m.retried + m.failed) / _seconds_of(m, now)) for m in minutes
    ]
    top = nice_ceiling(max((ok + fail for ok, fail in rates), default=0))
    slot = PLOT_W / len(minutes)
    bars = []
    for index, (stats, (ok, fail)) in enumerate(zip(minutes, rates, strict=True)):
        ok_height, fail_height = PLOT_H * ok / top, PLOT_H * fail / top
        failures = stats.retried + stats.failed
        bars.append(Bar(
            minute=_iso(stats.minute), x=LEFT + slot * index + 0.5, width=max(slot - 1, 1),
            ok_y=TOP + PLOT_H - ok_height, ok_height=ok_height,
            fail_y=TOP + PLOT_H - ok_height - fail_height, fail_height=fail_height,
            succeeded=stats.succeeded, failures=failures,
            title=f"{stats.minute:%H:%M} UTC: {stats.succeeded} delivered ({_number(ok)}/s), "
                  f"{failures} failed ({_number(fail)}/s)",
        ))  # fmt: skip
    empty = not any(m.attempts for m in minutes)
    return Chart(_ticks(top, "/s"), _x_labels(minutes), bars, [], empty)


def latency_chart(minutes: Sequence[MinuteStats]) -> Chart:
    series = {name: [m.percentile(q) for m in minutes] for name, q in (("p50", 0.5), ("p95", 0.95))}
    top = nice_ceiling(max((p.ms for values in series.values() for p in values if p is not None), default=0))
    slot = PLOT_W / len(minutes)
    lines = []
    for name, values in series.items():
        points: list[Point] = []
        segments: list[str] = []
        run: list[str] = []
        for index, (stats, found) in enumerate(zip(minutes, values, strict=True)):
            if found is None:
                segments, run = _close(segments, run), []
                continue
            y = TOP + PLOT_H * (1 - found.ms / top)
            point = Point(_iso(stats.minute), LEFT + slot * (index + 0.5), y, found.ms, found.over)
            points.append(point)
            run.append(f"{point.x:.1f},{point.y:.1f}")
        lines.append(Line(name, _close(segments, run), points))
    empty = not any(line.points for line in lines)
    return Chart(_ticks(top, " ms"), _x_labels(minutes), [], lines, empty)


def _close(segments: list[str], run: list[str]) -> list[str]:
    return [*segments, " ".join(run)] if run else segments
