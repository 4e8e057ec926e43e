"""Fixtures for the tests of enqueueing from SQL (docs/sql-enqueue.md): a fresh PostgreSQL
database holding Workly in schema ``workly``, as an application's database would.

Every test here needs PostgreSQL (in CI it must run, never skip: see tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.sql.parity import Rig
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.storage.postgres import PostgresStorage

SCHEMA = "workly"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/sql/" in str(item.path):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture
async def app_db(pg_fresh_db: str) -> str:
    """A new database with Workly migrated into schema ``workly`` (the functions too)."""
    storage = await PostgresStorage.open(pg_fresh_db, schema=SCHEMA)
    try:
        await storage.database.migrate()
    finally:
        await storage.close()
    return pg_fresh_db


@pytest.fixture
async def app_conn(app_db: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection as the application has one: default search_path, not Workly's."""
    conn = await asyncpg.connect(app_db)
    yield conn
    await conn.close()


@pytest.fixture
async def rig(pg_url: str) -> AsyncIterator[Rig]:
    """The API in-process (dispatcher off) and a connection, on one database (Workly in public)."""
    options = Settings(database_url=pg_url, signing_secret=TEST_SECRET, dispatch=False)
    async with in_process(options) as (_, http):
        conn = await asyncpg.connect(pg_url)
        try:
            yield Rig(http, conn)
        finally:
            await conn.close()
