"""Index rebuilds: on PostgreSQL the indexes of the churning tables grow with every task
ever stored, not with the tasks kept (retention empties pages but failed tasks stay in
them; workly/storage/postgres/indexes.py); every WORKLY_REINDEX_INTERVAL the ones grown far
past what their entries need are rebuilt without blocking anything."""

from __future__ import annotations

from typing import Protocol

from workly.metrics import Metrics


class BloatedIndexes(Protocol):
    """What rebuilding needs (an UpkeepStore has it)."""

    async def rebuild_bloated_indexes(self) -> list[str]: ...


class IndexRebuilds:
    name = "index rebuilds"

    def __init__(self, store: BloatedIndexes, metrics: Metrics, every: float) -> None:
        self._store = store
        self._metrics = metrics
        self._every = every
        self.rebuilt: list[str] = []

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        rebuilt = await self._store.rebuild_bloated_indexes()
        self.rebuilt += rebuilt
        if rebuilt:
            self._metrics.index_rebuilds.inc(len(rebuilt))
