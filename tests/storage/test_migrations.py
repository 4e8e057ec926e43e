"""Migrations: same numbers per dialect, applied once, recorded in schema_version."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from workly.storage.migrator import load_migrations
from workly.storage.postgres import PostgresStorage
from workly.storage.sqlite import SqliteStorage


def test_dialects_have_the_same_migration_numbers() -> None:
    postgres = [(m.version, m.name) for m in load_migrations("postgres")]
    sqlite = [(m.version, m.name) for m in load_migrations("sqlite")]
    assert postgres == sqlite
    assert [version for version, _ in postgres] == list(range(1, len(postgres) + 1))


async def test_sqlite_migrates_once(sqlite_url: str) -> None:
    storage = await SqliteStorage.open(sqlite_url)
    try:
        latest = len(load_migrations("sqlite"))
        assert await storage.schema_version() == 0
        assert await storage.migrate() == list(range(1, latest + 1))
        assert await storage.migrate() == []
        assert await storage.schema_version() == latest
    finally:
        await storage.close()


@pytest.mark.postgres
async def test_postgres_migrates_once_even_when_processes_race(pg_fresh_db: str) -> None:
    storages = [await PostgresStorage.open(pg_fresh_db) for _ in range(3)]
    try:
        applied = await asyncio.gather(*(s.migrate() for s in storages))
        latest = len(load_migrations("postgres"))
        assert sorted(applied, key=len) == [[], [], list(range(1, latest + 1))]
        assert await storages[0].schema_version() == latest
    finally:
        for storage in storages:
            await storage.close()


@pytest.mark.postgres
async def test_postgres_schema_has_the_claim_index(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        definition = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'tasks_claim'")
    finally:
        await conn.close()
    assert "(queue, priority DESC, run_at, seq)" in definition
    assert "WHERE ((status = 'ready'::text) AND (tenant IS NULL) AND (key IS NULL))" in definition
