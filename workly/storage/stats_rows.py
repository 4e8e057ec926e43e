"""delivery_minutes rows ↔ MinuteStats, for both dialects (each passes its time codec)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from workly.delivery_stats import BUCKETS_MS, MinuteStats

BUCKET_COLUMNS = tuple(f"b{index}" for index in range(len(BUCKETS_MS)))


def in_key_order(stats: Iterable[MinuteStats]) -> list[MinuteStats]:
    """The rows as every process writes them: in one order, so that two flushes' upserts
    of the same rows never wait for each other in a cycle (a deadlock on PostgreSQL)."""
    return sorted(stats, key=lambda row: (row.scope, row.name, row.minute))


def minute_params(stats: MinuteStats, minute: Any) -> dict[str, Any]:
    """add_delivery_minute's parameters; ``minute`` as the dialect stores times."""
    return {
        "scope": stats.scope,
        "name": stats.name,
        "minute": minute,
        "succeeded": stats.succeeded,
        "retried": stats.retried,
        "failed": stats.failed,
        **dict(zip(BUCKET_COLUMNS, stats.buckets, strict=True)),
    }


def minute_from_row(row: Any, decode_time: Callable[[Any], datetime]) -> MinuteStats:
    return MinuteStats(
        scope=row["scope"],
        name=row["name"],
        minute=decode_time(row["minute"]),
        succeeded=row["succeeded"],
        retried=row["retried"],
        failed=row["failed"],
        buckets=[row[column] for column in BUCKET_COLUMNS],
    )
