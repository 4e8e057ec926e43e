"""The soak's view into the database under test: table sizes over time, and the final audit.

Sizes: on PostgreSQL each table's total size (heap, indexes, TOAST), its index size, live
and dead tuples as the statistics collector counts them, and the database's size; on
SQLite the file's and the WAL's size, free pages and the rows of the two busy tables.
The audit reads every task left in the database (retention has deleted the succeeded
tasks older than its window: the books account for those through the receiver's ledger).
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import asyncpg

TABLES = ("tasks", "attempts", "events")


@dataclass(frozen=True, slots=True)
class TaskRow:
    status: str
    attempts: int
    last_error: str | None


class Probe(Protocol):
    async def sizes(self) -> dict[str, float]: ...

    async def counters(self) -> dict[str, float]: ...

    async def tasks(self) -> dict[str, TaskRow]: ...

    async def close(self) -> None: ...


class PostgresProbe:
    def __init__(self, url: str) -> None:
        self._url = url
        self._connection: asyncpg.Connection | None = None

    async def _connect(self) -> asyncpg.Connection:
        if self._connection is None or self._connection.is_closed():
            self._connection = await asyncpg.connect(self._url, timeout=5)
        return self._connection

    async def sizes(self) -> dict[str, float]:
        connection = await self._connect()
        sizes: dict[str, float] = {
            "db_mib": await connection.fetchval("SELECT pg_database_size(current_database())") / 2**20
        }
        rows = await connection.fetch(
            """SELECT relname, pg_total_relation_size(relid) AS total, pg_indexes_size(relid) AS indexes,
                      n_live_tup, n_dead_tup
               FROM pg_stat_user_tables WHERE relname = ANY($1::text[])""",
            list(TABLES),
        )
        for row in rows:
            name = row["relname"]
            sizes[f"{name}_mib"] = row["total"] / 2**20
            sizes[f"{name}_index_mib"] = row["indexes"] / 2**20
            sizes[f"{name}_live"] = row["n_live_tup"]
            sizes[f"{name}_dead"] = row["n_dead_tup"]
        return sizes

    async def counters(self) -> dict[str, float]:
        """Cumulative: WAL bytes, writes and syncs (pg_stat_wal) and commits, server-wide."""
        connection = await self._connect()
        wal = await connection.fetchrow("SELECT wal_bytes, wal_write, wal_sync, wal_fpi FROM pg_stat_wal")
        commits = await connection.fetchval("SELECT sum(xact_commit) FROM pg_stat_database")
        assert wal is not None
        return {
            "wal_bytes": float(wal["wal_bytes"]), "wal_writes": float(wal["wal_write"]),
            "wal_syncs": float(wal["wal_sync"]), "wal_full_pages": float(wal["wal_fpi"]),
            "commits": float(commits),
        }  # fmt: skip

    async def tasks(self) -> dict[str, TaskRow]:
        connection = await self._connect()
        rows = await connection.fetch("SELECT id, status, attempts, last_error FROM tasks")
        return {row["id"]: TaskRow(row["status"], row["attempts"], row["last_error"]) for row in rows}

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


class SqliteProbe:
    """Reads through its own read-only connection (WAL lets it read beside the writer)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def _read(self, query: str) -> list[tuple[Any, ...]]:
        connection = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, timeout=10)
        try:
            return connection.execute(query).fetchall()
        finally:
            connection.close()

    async def sizes(self) -> dict[str, float]:
        wal = self._path.with_name(self._path.name + "-wal")
        sizes: dict[str, float] = {
            "db_mib": self._path.stat().st_size / 2**20,
            "wal_mib": wal.stat().st_size / 2**20 if wal.exists() else 0.0,
        }
        counts = "SELECT " + ", ".join(f"(SELECT count(*) FROM {table})" for table in TABLES)
        row = (await asyncio.to_thread(self._read, counts))[0]
        for table, count in zip(TABLES, row, strict=True):
            sizes[f"{table}_live"] = float(count)
        free = await asyncio.to_thread(self._read, "PRAGMA freelist_count")
        page = await asyncio.to_thread(self._read, "PRAGMA page_size")
        sizes["free_mib"] = float(free[0][0]) * float(page[0][0]) / 2**20
        return sizes

    async def counters(self) -> dict[str, float]:
        return {}  # SQLite keeps no such statistics

    async def tasks(self) -> dict[str, TaskRow]:
        rows = await asyncio.to_thread(self._read, "SELECT id, status, attempts, last_error FROM tasks")
        return {r[0]: TaskRow(r[1], r[2], r[3]) for r in rows}

    async def close(self) -> None:
        return None
