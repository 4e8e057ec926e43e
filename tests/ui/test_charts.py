"""The charts' geometry (workly/ui/charts.py): pure functions of the minutes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workly.delivery_stats import MinuteStats, bucket_of, minute_of, per_minute
from workly.ui.charts import PLOT_H, TOP, deliveries_chart, latency_chart, nice_ceiling

NOW = datetime(2026, 12, 2, 3, 40, 30, tzinfo=UTC)  # 30 s into the current minute


def hour(*rows: MinuteStats) -> list[MinuteStats]:
    return per_minute(rows, "queue", "q", NOW, 60)


def at(minutes_ago: int, **counts: int) -> MinuteStats:
    return MinuteStats("queue", "q", minute_of(NOW) - timedelta(minutes=minutes_ago), **counts)


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (0.3, 0.5), (1, 1), (1.2, 2), (3, 5), (7, 10), (10, 10), (4100, 5000)]
)
def test_the_scale_ends_at_a_round_number(value: float, ceiling: float) -> None:
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_bars_stack_failures_on_deliveries_as_rates_per_second() -> None:
    chart = deliveries_chart(hour(at(2, succeeded=60, retried=30, failed=30), at(0, succeeded=30)), NOW)
    assert len(chart.bars) == 60 and not chart.empty
    full, current = chart.bars[-3], chart.bars[-1]
    # 1/s delivered and 1/s failing two minutes ago; 30 in the current minute's 30 s is 1/s too.
    assert (full.succeeded, full.failures) == (60, 60)
    assert chart.ticks[-1].label == "2/s"  # the tallest stack, 2/s, tops the scale
    assert full.ok_height == pytest.approx(PLOT_H / 2) and full.fail_height == pytest.approx(PLOT_H / 2)
    assert full.fail_y == pytest.approx(TOP)  # the stack reaches the top
    assert current.ok_height == pytest.approx(PLOT_H / 2) and current.fail_height == 0
    assert chart.bars[0].ok_height == 0 and chart.bars[0].minute == "2026-12-02T02:41:00Z"
    assert full.title == "03:38 UTC: 60 delivered (1/s), 60 failed (1/s)"


def test_an_hour_without_attempts_is_empty() -> None:
    assert deliveries_chart(hour(), NOW).empty and latency_chart(hour()).empty


def test_latency_lines_break_where_a_minute_had_no_attempts() -> None:
    fast, slow, later = at(5, succeeded=10), at(4, succeeded=10), at(1, succeeded=10)
    fast.buckets[bucket_of(3)] = 10
    slow.buckets[bucket_of(3)] = 5
    slow.buckets[bucket_of(400)] = 5
    later.buckets[bucket_of(40)] = 10
    chart = latency_chart(hour(fast, slow, later))
    p50, p95 = chart.lines
    assert [point.ms for point in p50.points] == [5, 5, 50]
    assert [point.ms for point in p95.points] == [5, 500, 50]
    assert len(p95.segments) == 2  # minutes 5 and 4 joined; minute 1 alone after the gap
    assert chart.ticks[-1].label == "500 ms"
    assert p95.points[1].y == pytest.approx(TOP)  # the slowest point tops the scale
    assert p95.points[1].bound == "≤ 500 ms"


def test_attempts_slower_than_the_last_bound_read_as_more_than_it() -> None:
    stuck = at(2, failed=3)
    stuck.buckets[bucket_of(30_000)] = 3
    [p50, _] = latency_chart(hour(stuck)).lines
    assert [(point.ms, point.bound) for point in p50.points] == [(10_000, "> 10000 ms")]
