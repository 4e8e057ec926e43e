"""SQLite's periodic upkeep (UpkeepStore): the reaper, retention, breaker probes and the kept
task counts. Writes are bookkeeping (synchronous=NORMAL at most), but for the recount."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from workly.json_text import to_json
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.breakers import release_probes
from workly.storage.sqlite.statements import HELD_US, Connections, execute, fetchall, to_us

Db = sqlite3.Connection
_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteUpkeep:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged
        self._bookkeeping = db.bookkeeping

    async def reap_expired(self, now: datetime, limit: int = 1000) -> int:
        return await self._writer.transaction(self._bookkeeping, _reap, to_us(now), limit)

    async def recount_running(self) -> int:
        return 0  # nothing to repair: the claim counts running tasks itself (one writer)

    async def release_probes(self, now: datetime) -> int:
        return await self._writer.transaction(self._bookkeeping, release_probes, to_us(now))

    async def fold_task_counts(self) -> None:
        await self._writer.transaction(self._bookkeeping, execute, _q().fold_task_counts)

    async def miscounted_queues(self) -> list[str]:
        return [row["queue"] for row in await self._reader.run(fetchall, _q().miscounted_queues, {})]

    async def recount_tasks(self) -> None:
        await self._writer.transaction(self._acknowledged, _recount_tasks)

    async def vacuum(self) -> None:
        """Nothing to do: rows are updated in place, no dead versions pile up."""

    async def rebuild_bloated_indexes(self) -> list[str]:
        return []  # deletes rebalance SQLite's B-trees: underfull pages merge, empty ones are reused


def _reap(db: Db, now_us: int, limit: int) -> int:
    params = {"now": now_us, "limit": limit}
    seqs = [row["task_seq"] for row in fetchall(db, _q().reap_expired_attempts, params)]
    if seqs:
        execute(db, _q().reap_expired, {"now": now_us, "seqs": to_json(seqs), "held_until": HELD_US})
    return len(seqs)


def _recount_tasks(db: Db) -> None:
    execute(db, _q().clear_task_counts)
    execute(db, _q().count_tasks_into_counts)
