"""Open the backend a database URL names."""

from __future__ import annotations

from typing import Literal

from workly.storage.base import Storage

SynchronousMode = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


async def open_storage(
    url: str, *, sqlite_synchronous: SynchronousMode = "FULL", db_timeout: float = 10.0
) -> Storage:
    """``db_timeout`` bounds each statement (PostgreSQL) or each wait for the write lock (SQLite)."""
    if url.startswith("sqlite:///"):
        from workly.storage.sqlite import SqliteStorage

        return await SqliteStorage.open(url, sqlite_synchronous, busy_timeout=db_timeout)
    from workly.storage.postgres import PostgresStorage

    return await PostgresStorage.open(url, command_timeout=db_timeout)
