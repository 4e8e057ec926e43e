"""Migrations: same numbers per dialect, applied once, recorded in schema_version."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from workly.storage import migrator
from workly.storage.factory import open_storage
from workly.storage.migrator import Migration, load_migrations
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
        assert await storage.database.schema_version() == 0
        assert await storage.database.migrate() == list(range(1, latest + 1))
        assert await storage.database.migrate() == []
        assert await storage.database.schema_version() == latest
    finally:
        await storage.close()


@pytest.mark.postgres
async def test_postgres_migrates_once_even_when_processes_race(pg_fresh_db: str) -> None:
    storages = [await PostgresStorage.open(pg_fresh_db) for _ in range(3)]
    try:
        applied = await asyncio.gather(*(s.database.migrate() for s in storages))
        latest = len(load_migrations("postgres"))
        assert sorted(applied, key=len) == [[], [], list(range(1, latest + 1))]
        assert await storages[0].database.schema_version() == latest
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


def test_a_misnamed_or_unnumbered_migration_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "0001_first.sql").write_text("SELECT 1;")
    (tmp_path / "0002-second.sql").write_text("SELECT 2;")
    with pytest.raises(RuntimeError, match=r"'0002-second\.sql' is not named NNNN_<name>\.sql"):
        load_migrations("sqlite", tmp_path)
    (tmp_path / "0002-second.sql").rename(tmp_path / "0003_third.sql")
    with pytest.raises(RuntimeError, match="without gaps"):
        load_migrations("sqlite", tmp_path)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def unmigrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    url: str = request.getfixturevalue("pg_fresh_db")
    return url


async def test_a_migration_of_comments_only_is_recorded_without_being_run(
    unmigrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = unmigrated_url
    packaged = load_migrations("sqlite" if url.startswith("sqlite") else "postgres")
    nothing = Migration(len(packaged) + 1, "nothing", "-- nothing to do in this dialect\n\n")
    assert nothing.is_empty and not packaged[0].is_empty
    monkeypatch.setattr(migrator, "load_migrations", lambda dialect: [*packaged, nothing])
    storage = await open_storage(url)
    try:
        assert (await storage.database.migrate())[-1] == nothing.version
        assert await storage.database.schema_version() == nothing.version
    finally:
        await storage.close()
