"""Migrations: same numbers per dialect, applied once, recorded in schema_version."""

from __future__ import annotations

import asyncio
import sqlite3
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


async def test_sqlite_keeps_its_bulk_operations_when_0019_and_0020_remake_their_table(tmp_path: Path) -> None:
    """SQLite cannot change a CHECK: migrations 19 and 20 make the operations table again to
    allow 'replay' and 'erase'. The operations stored before come through whole, and new
    ones number on."""
    path = tmp_path / "at_18.db"
    url = f"sqlite:///{path}"
    storage = await SqliteStorage.open(url)
    try:
        await storage.database.migrate()
    finally:
        await storage.close()
    db = sqlite3.connect(path, isolation_level=None)
    try:  # back to 18 with a retry operation stored, as a database of the previous version has it
        before = db.execute("SELECT * FROM operations").fetchall()
        assert before == []
        db.execute("DELETE FROM schema_version WHERE version IN (19, 20)")
        for statement in (
            "DROP INDEX tasks_failed", "DROP INDEX tasks_tenant", "DROP INDEX tasks_callback_of",
            "ALTER TABLE queues DROP COLUMN retention", "ALTER TABLE queues DROP COLUMN retired",
            "ALTER TABLE operations DROP COLUMN phase",
        ):  # fmt: skip
            db.execute(statement)
        for statement in (
            "DROP TABLE event_types", "DROP TABLE settings", "DROP VIEW task_view",
            "ALTER TABLE endpoints DROP COLUMN payload_format", "ALTER TABLE endpoints DROP COLUMN filter",
            "ALTER TABLE events DROP COLUMN labels", "ALTER TABLE tasks DROP COLUMN test",
        ):  # fmt: skip
            db.execute(statement)
        db.execute(
            "INSERT INTO operations (id, action, filter, state, matched, changed, skipped, after_seq,"
            " upto_seq, created_at, updated_at)"
            " VALUES ('op_old', 'retry', '{\"queue\":\"q\"}', 'running', 5, 2, 1, 7, 9, 1, 2)"
        )
        kept = db.execute("SELECT * FROM operations").fetchall()
    finally:
        db.close()
    storage = await SqliteStorage.open(url)
    try:
        assert await storage.database.migrate() == [19, 20]
        old = await storage.operations.get_operation("op_old")
        assert old is not None and (old.action, old.matched, old.changed, old.skipped) == ("retry", 5, 2, 1)
    finally:
        await storage.close()
    db = sqlite3.connect(path, isolation_level=None)
    try:
        assert [row[:16] for row in db.execute("SELECT * FROM operations")] == kept  # and phase, null
        db.execute(
            "INSERT INTO operations (id, action, filter, upto_seq, created_at, updated_at)"
            " VALUES ('op_new', 'replay', '{}', 0, 3, 3)"
        )
        seqs = [row[0] for row in db.execute("SELECT seq FROM operations ORDER BY seq")]
        assert seqs[1] > seqs[0]
        indexes = {
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'operations'")
        }
        assert "operations_running" in indexes
    finally:
        db.close()
