"""Delivery history: the dispatcher's counts per queue, endpoint and minute (the dashboard's
charts, workly/delivery_stats.py) are written every few seconds and kept two hours. Two
jobs over one DeliveryHistory: the writes, and the pruning of what is older."""

from __future__ import annotations

from workly.service.delivery_history import DeliveryHistory


class HistoryWrites:
    name = "delivery history"

    def __init__(self, history: DeliveryHistory, every: float = 5.0) -> None:
        self._history = history
        self._every = every

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        await self._history.flush()


class HistoryPruning:
    name = "delivery history pruning"

    def __init__(self, history: DeliveryHistory, every: float = 60.0) -> None:
        self._history = history
        self._every = every

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        await self._history.prune()
