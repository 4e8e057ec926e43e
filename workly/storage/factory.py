"""Open the backend a database URL names."""

from __future__ import annotations

from workly.storage.base import Storage


async def open_storage(url: str) -> Storage:
    if url.startswith("sqlite:///"):
        from workly.storage.sqlite import SqliteStorage

        return await SqliteStorage.open(url)
    from workly.storage.postgres import PostgresStorage

    return await PostgresStorage.open(url)
