"""Open the backend a database URL names."""

from __future__ import annotations

from typing import Literal

from workly.storage.base import Storage

SynchronousMode = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


async def open_storage(url: str, sqlite_synchronous: SynchronousMode = "FULL") -> Storage:
    if url.startswith("sqlite:///"):
        from workly.storage.sqlite import SqliteStorage

        return await SqliteStorage.open(url, sqlite_synchronous)
    from workly.storage.postgres import PostgresStorage

    return await PostgresStorage.open(url)
