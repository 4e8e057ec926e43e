"""The per-minute delivery counts behind the dashboard's charts (workly/delivery_stats.py):
pure logic, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workly.delivery_stats import (
    BUCKETS_MS,
    MinuteStats,
    Percentile,
    Rollup,
    bucket_of,
    minute_of,
    per_minute,
    succeeded_within,
)

T0 = datetime(2026, 12, 2, 3, 40, 12, 345678, tzinfo=UTC)


def test_a_minute_starts_at_its_first_second() -> None:
    assert minute_of(T0) == datetime(2026, 12, 2, 3, 40, tzinfo=UTC)


@pytest.mark.parametrize(
    ("ms", "bucket"), [(0, 0), (5, 0), (5.01, 1), (99, 4), (100, 4), (101, 5), (10_000, 10), (10_001, 11)]
)
def test_a_duration_falls_in_the_first_bucket_it_fits(ms: float, bucket: int) -> None:
    assert bucket_of(ms) == bucket


def test_percentiles_are_the_upper_bound_of_the_bucket_the_rank_falls_in() -> None:
    stats = MinuteStats("queue", "q", minute_of(T0))
    assert stats.percentile(0.5) is None  # no attempts
    stats.buckets[bucket_of(3)] = 90  # ≤ 5 ms
    stats.buckets[bucket_of(200)] = 9  # ≤ 250 ms
    stats.buckets[bucket_of(60_000)] = 1  # beyond the last bound
    assert stats.percentile(0.5) == Percentile(5, over=False)
    assert stats.percentile(0.9) == Percentile(5, over=False)  # rank 90: still the first bucket
    assert stats.percentile(0.95) == Percentile(250, over=False)
    assert stats.percentile(1.0) == Percentile(BUCKETS_MS[-2], over=True)  # the open bucket: more than


def test_the_rollup_counts_per_queue_endpoint_and_minute_and_forgets_what_it_hands_over() -> None:
    rollup = Rollup()
    rollup.add("q", None, T0, "succeeded", 0.004)
    rollup.add("q", "ep_1", T0, "retry", 0.2)
    rollup.add("q", "ep_1", T0 + timedelta(seconds=50), "failed", None)  # not sent: no duration
    [queue_minute, later] = sorted(rollup.pending("queue", "q"), key=lambda s: s.minute)
    assert (queue_minute.succeeded, queue_minute.retried, queue_minute.failed) == (1, 1, 0)
    assert sum(queue_minute.buckets) == 2
    assert (later.failed, sum(later.buckets)) == (1, 0)
    assert [s.attempts for s in rollup.pending("endpoint", "ep_1")] == [1, 1]
    assert rollup.pending("endpoint", "q") == []

    taken = rollup.take()
    assert len(taken) == 4 and rollup.pending("queue", "q") == []
    rollup.add("q", None, T0, "succeeded", 0.004)
    rollup.give_back(taken)  # a write failed: kept, added to what came since
    again = {(s.scope, s.minute): s for s in rollup.pending("queue", "q")}
    assert again[("queue", minute_of(T0))].succeeded == 2


def test_per_minute_has_every_minute_once_with_its_rows_added_up() -> None:
    first, second = (
        MinuteStats("queue", "q", minute_of(T0), succeeded=2),
        MinuteStats("queue", "q", minute_of(T0), failed=1),
    )
    old = MinuteStats("queue", "q", minute_of(T0) - timedelta(hours=1), succeeded=9)  # outside the window
    minutes = per_minute([first, second, old], "queue", "q", T0, 60)
    assert len(minutes) == 60 and minutes[-1].minute == minute_of(T0)
    assert minutes[0].minute == minute_of(T0) - timedelta(minutes=59)
    assert (minutes[-1].succeeded, minutes[-1].failed) == (2, 1)
    assert sum(m.attempts for m in minutes) == 3


def test_succeeded_within_counts_the_share_of_a_minute_inside_the_window() -> None:
    now = minute_of(T0) + timedelta(seconds=15)  # 15 s into the current minute
    rows = [
        MinuteStats("queue", "q", minute_of(T0), succeeded=10),  # the current minute: all inside
        MinuteStats(
            "queue", "q", minute_of(T0) - timedelta(minutes=1), succeeded=60
        ),  # 45 of its 60 s inside
        MinuteStats("queue", "q", minute_of(T0) - timedelta(minutes=2), succeeded=99),  # before the window
        MinuteStats("queue", "r", minute_of(T0) - timedelta(minutes=1), succeeded=1),  # 0.75: rounds to 1
        MinuteStats("queue", "s", minute_of(T0), failed=3),  # no success: not listed
    ]
    assert succeeded_within(rows, now - timedelta(seconds=60), now) == {"q": 10 + 45, "r": 1}
