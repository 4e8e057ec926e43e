"""The delivery history behind the dashboard's charts (workly/delivery_stats.py): attempts
per queue, endpoint and minute, added to by every process."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from workly.delivery_stats import MinuteStats, Scope


class HistoryStore(Protocol):
    async def add_delivery_minutes(self, stats: Sequence[MinuteStats]) -> None:
        """Add these counts to the stored ones of their series and minute (other processes
        add theirs too), in one transaction."""

    async def delivery_minutes(self, scope: Scope, name: str | None, since: datetime) -> list[MinuteStats]:
        """The stored minutes of one series (None: of every series of ``scope``) from ``since``
        on, oldest first."""

    async def prune_delivery_minutes(self, before: datetime) -> None:
        """Delete every series' minutes before ``before``."""
