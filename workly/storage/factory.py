"""Open the backend a database URL names."""

from __future__ import annotations

from workly.clock import Clock
from workly.database_url import is_sqlite
from workly.storage.contract import Storage
from workly.storage.sqlite.thread import SynchronousMode


async def open_storage(
    url: str,
    *,
    sqlite_synchronous: SynchronousMode = "FULL",
    db_timeout: float = 10.0,
    schema: str | None = None,
    clock: Clock | None = None,
) -> Storage:
    """``db_timeout`` bounds each statement (PostgreSQL) or each wait for the write lock (SQLite);
    ``schema`` is PostgreSQL's WORKLY_DATABASE_SCHEMA, None when not configured; ``clock``
    is what PostgreSQL's notifier waits on between reconnects."""
    if is_sqlite(url):
        from workly.storage.sqlite import SqliteStorage

        return await SqliteStorage.open(url, sqlite_synchronous, busy_timeout=db_timeout)
    from workly.storage.postgres import PostgresStorage

    return await PostgresStorage.open(url, command_timeout=db_timeout, schema=schema, clock=clock)
