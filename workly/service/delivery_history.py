"""The dashboard's charts: this process's delivery counts (workly/delivery_stats.py) written
every few seconds, kept two hours, and read back per queue or endpoint with what is not
written yet."""

from __future__ import annotations

from datetime import timedelta

from workly.clock import Clock
from workly.delivery_stats import KEPT, MinuteStats, Rollup, Scope, minute_of, per_minute, succeeded_within
from workly.storage.base import Storage


class DeliveryHistory:
    def __init__(self, storage: Storage, clock: Clock, rollup: Rollup) -> None:
        self._storage = storage
        self._clock = clock
        self._rollup = rollup

    async def flush(self) -> None:
        """Write what was counted since the last flush; on failure keep it for the next."""
        taken = self._rollup.take()
        if not taken:
            return
        try:
            await self._storage.add_delivery_minutes(taken)
        except BaseException:
            self._rollup.give_back(taken)
            raise

    async def prune(self) -> None:
        await self._storage.prune_delivery_minutes(self._clock() - KEPT)

    async def succeeded_in_last(self, window: timedelta) -> dict[str, int]:
        """Per queue, about how many deliveries succeeded within ``window`` (up to a minute):
        the overview's throughput, from the minutes, not from the tasks."""
        now = self._clock()
        stored = await self._storage.delivery_minutes("queue", None, minute_of(now - window))
        return succeeded_within([*stored, *self._rollup.pending("queue")], now - window, now)

    async def last_minutes(self, scope: Scope, name: str, minutes: int = 60) -> list[MinuteStats]:
        """One entry per minute of the last ``minutes`` (the current one last, still counting),
        oldest first: every process's written counts and this one's unwritten ones."""
        now = self._clock()
        since = minute_of(now) - timedelta(minutes=minutes - 1)
        stored = await self._storage.delivery_minutes(scope, name, since)
        return per_minute([*stored, *self._rollup.pending(scope, name)], scope, name, now, minutes)
