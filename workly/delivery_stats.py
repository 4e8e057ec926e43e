"""Deliveries per queue and minute, for the dashboard's charts: a small rollup, not a scan.

Each process counts its attempts per queue, per endpoint and per minute in memory
(``Rollup``): how many succeeded, failed for good and will be retried, and their durations
in fixed buckets. Upkeep (service/upkeep/history_writes.py) adds what was counted to the
``delivery_minutes`` table every few seconds (one row per series and minute, whatever the
number of processes) and deletes the rows older than two hours. A chart reads the hour's
rows and adds what this process has not written yet; another process's last seconds show
once it writes them.
Percentiles come from the buckets: the upper bound of the bucket the rank falls in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from workly.models import Outcome

# Upper bounds of the duration buckets, in milliseconds; the last bucket takes the rest.
BUCKETS_MS: tuple[float, ...] = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, math.inf)
# What a series is of: a queue's attempts, or an endpoint's (its fan-out deliveries).
Scope = Literal["queue", "endpoint"]
KEPT = timedelta(hours=2)  # how long the upkeep keeps a minute's row


def minute_of(when: datetime) -> datetime:
    return when.replace(second=0, microsecond=0)


def bucket_of(milliseconds: float) -> int:
    return next(index for index, bound in enumerate(BUCKETS_MS) if milliseconds <= bound)


@dataclass(frozen=True, slots=True)
class Percentile:
    ms: float
    over: bool  # True: more than ``ms`` (the open last bucket); else at most ``ms``


@dataclass
class MinuteStats:
    scope: Scope
    name: str  # the queue's name or the endpoint's id
    minute: datetime  # its start, UTC
    succeeded: int = 0
    retried: int = 0  # failed attempts that will be retried
    failed: int = 0  # failed attempts that ended their task
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS_MS))

    def of(self, scope: Scope, name: str | None) -> bool:
        """Whether this is a minute of that series (``name`` None: of any of ``scope``)."""
        return self.scope == scope and name in (None, self.name)

    @property
    def attempts(self) -> int:
        return self.succeeded + self.retried + self.failed

    def add(self, other: MinuteStats) -> None:
        self.succeeded += other.succeeded
        self.retried += other.retried
        self.failed += other.failed
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]

    def percentile(self, fraction: float) -> Percentile | None:
        """How long ``fraction`` of the attempts took at most: the upper bound of the bucket
        the rank falls in (of the open last bucket: more than its lower bound); None without
        attempts."""
        total = sum(self.buckets)
        if not total:
            return None
        rank = max(1, math.ceil(fraction * total))
        seen = 0
        for index, count in enumerate(self.buckets):
            seen += count
            if seen >= rank:
                bound = BUCKETS_MS[index]
                if math.isfinite(bound):
                    return Percentile(bound, over=False)
                return Percentile(BUCKETS_MS[index - 1], over=True)
        raise AssertionError("unreachable: the ranks add up to the total")


class Rollup:
    """This process's counts not yet written, per series and minute."""

    def __init__(self) -> None:
        self._counts: dict[tuple[Scope, str, datetime], MinuteStats] = {}

    def add(
        self,
        queue: str,
        endpoint_id: str | None,
        finished_at: datetime,
        outcome: Outcome,
        seconds: float | None,
    ) -> None:
        """One attempt: ``outcome`` as AttemptResult names it; ``seconds`` None for a task
        that was not sent (past its deadline), which counts but has no duration."""
        minute = minute_of(finished_at)
        self._count(self._series("queue", queue, minute), outcome, seconds)
        if endpoint_id is not None:
            self._count(self._series("endpoint", endpoint_id, minute), outcome, seconds)

    def _series(self, scope: Scope, name: str, minute: datetime) -> MinuteStats:
        stats = self._counts.get((scope, name, minute))
        if stats is None:
            stats = self._counts[(scope, name, minute)] = MinuteStats(scope, name, minute)
        return stats

    @staticmethod
    def _count(stats: MinuteStats, outcome: Outcome, seconds: float | None) -> None:
        if outcome == "succeeded":
            stats.succeeded += 1
        elif outcome == "retry":
            stats.retried += 1
        else:
            stats.failed += 1
        if seconds is not None:
            stats.buckets[bucket_of(seconds * 1000)] += 1

    def take(self) -> list[MinuteStats]:
        """Everything counted since the last take (to write), and forget it."""
        taken, self._counts = list(self._counts.values()), {}
        return taken

    def give_back(self, stats: Sequence[MinuteStats]) -> None:
        """Counts a write could not store: kept for the next one."""
        for row in stats:
            self._series(row.scope, row.name, row.minute).add(row)

    def pending(self, scope: Scope, name: str | None = None) -> list[MinuteStats]:
        """What is not written yet of one series (None: of every series of ``scope``)."""
        return [stats for stats in self._counts.values() if stats.of(scope, name)]


def succeeded_within(rows: Iterable[MinuteStats], start: datetime, now: datetime) -> dict[str, int]:
    """Per series, about how many attempts succeeded from ``start`` to ``now``: a minute
    partly inside counts for the share of it inside (its attempts taken as spread evenly
    over it; the current minute's over its seconds so far), rounded."""
    totals: dict[str, float] = {}
    for row in rows:
        end = min(row.minute + timedelta(minutes=1), now)
        span = (end - row.minute).total_seconds()
        inside = (end - max(row.minute, start)).total_seconds()
        if span > 0 and inside > 0:
            totals[row.name] = totals.get(row.name, 0.0) + row.succeeded * min(1.0, inside / span)
    return {name: round(total) for name, total in totals.items() if round(total)}


def per_minute(
    rows: Iterable[MinuteStats], scope: Scope, name: str, until: datetime, minutes: int
) -> list[MinuteStats]:
    """One entry per minute of the ``minutes`` up to ``until``'s, oldest first, the rows of
    each minute added up (none: zeros)."""
    first = minute_of(until) - timedelta(minutes=minutes - 1)
    starts = [first + timedelta(minutes=n) for n in range(minutes)]
    merged = {start: MinuteStats(scope, name, start) for start in starts}
    for row in rows:
        target = merged.get(minute_of(row.minute))
        if target is not None:
            target.add(row)
    return list(merged.values())
