"""The dashboard's charts: this process's delivery counts (workly/delivery_stats.py) written
every few seconds, kept two hours, and read back per queue or endpoint with what is not
written yet."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from workly.clock import Clock
from workly.delivery_stats import KEPT, MinuteStats, Rollup, Scope, minute_of, per_minute, succeeded_within
from workly.storage.contract import HistoryStore

log = logging.getLogger("workly.housekeeping")


class DeliveryHistory:
    def __init__(self, storage: HistoryStore, clock: Clock, rollup: Rollup) -> None:
        self._storage = storage
        self._clock = clock
        self._rollup = rollup
        self._writing: asyncio.Future[None] | None = None
        self._unwritten: list[MinuteStats] = []  # taken for the write in flight

    async def flush(self) -> None:
        """Write what was counted since the last flush; what a failed write could not
        store is kept for the next. A cancelled flush leaves its write running (it may
        commit: writing its rows again would count them twice); the next flush, such as
        the last one when the service stops, waits for it first."""
        try:
            await self._finish_write()
        except Exception as exc:  # its rows were given back: this flush writes them
            log.warning("an earlier write of the delivery counts failed: %s", exc)
        taken = self._rollup.take()
        if not taken:
            return
        self._unwritten = taken
        self._writing = asyncio.ensure_future(self._write(taken))
        await self._finish_write()

    async def _write(self, taken: list[MinuteStats]) -> None:
        try:
            await self._storage.add_delivery_minutes(taken)
        except Exception:
            self._rollup.give_back(taken)  # the transaction did not commit
            raise
        finally:
            self._unwritten = []

    async def _finish_write(self) -> None:
        writing = self._writing
        if writing is None:
            return
        try:
            await asyncio.shield(writing)
        finally:
            if writing.done():
                self._writing = None

    async def prune(self) -> None:
        await self._storage.prune_delivery_minutes(self._clock.now() - KEPT)

    async def succeeded_in_last(self, window: timedelta) -> dict[str, int]:
        """Per queue, about how many deliveries succeeded within ``window`` (up to a minute):
        the overview's throughput, from the minutes, not from the tasks."""
        now = self._clock.now()
        stored = await self._storage.delivery_minutes("queue", None, minute_of(now - window))
        return succeeded_within([*stored, *self._pending("queue")], now - window, now)

    async def last_minutes(self, scope: Scope, name: str, minutes: int = 60) -> list[MinuteStats]:
        """One entry per minute of the last ``minutes`` (the current one last, still counting),
        oldest first: every process's written counts and this one's unwritten ones."""
        now = self._clock.now()
        since = minute_of(now) - timedelta(minutes=minutes - 1)
        stored = await self._storage.delivery_minutes(scope, name, since)
        return per_minute([*stored, *self._pending(scope, name)], scope, name, now, minutes)

    def _pending(self, scope: Scope, name: str | None = None) -> list[MinuteStats]:
        """This process's counts not in the table yet: not taken, or in the write in flight."""
        unwritten = [stats for stats in self._unwritten if stats.of(scope, name)]
        return [*self._rollup.pending(scope, name), *unwritten]
