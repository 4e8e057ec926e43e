"""Task counts: the tasks per queue and status are kept by triggers (migration 0014); on
PostgreSQL each statement appends its change, and the fold makes them one row per queue
and status again every couple of seconds, so reading them stays cheap."""

from __future__ import annotations

from workly.storage.contract import UpkeepStore


class CountFold:
    name = "task counts"

    def __init__(self, store: UpkeepStore, every: float = 2.0) -> None:
        self._store = store
        self._every = every

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        await self._store.fold_task_counts()
