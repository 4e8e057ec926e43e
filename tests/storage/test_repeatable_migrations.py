"""Repeatable files (workly/migrations/<dialect>/repeatable/): run after the numbered
migrations when their content changes, recorded in schema_repeatables; an install the old
numbered migrations made comes out with the same views and functions as a fresh one, and keeps
the grants on its functions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from workly.storage import migrator
from workly.storage.factory import open_storage
from workly.storage.migrator import Repeatable, load_migrations, load_repeatables
from workly.storage.postgres import PostgresStorage
from workly.storage.queries import Dialect
from workly.storage.sqlite.statements import split_statements

# The numbered migrations before repeatable files existed: what the old code applied.
OLD = 15
LATEST = [m.version for m in load_migrations("postgres")]
# Run once more each time its content changes: counts its runs in a table of its own.
PROBE = Repeatable(
    "zz_probe", "CREATE TABLE IF NOT EXISTS probe_runs (n integer);\nINSERT INTO probe_runs VALUES (1);\n"
)


def test_the_repeatable_files_are_the_views_the_old_migrations_left() -> None:
    assert [r.name for r in load_repeatables("postgres")] == ["functions", "views"]
    assert [r.name for r in load_repeatables("sqlite")] == ["views"]  # SQLite has no SQL functions
    dialects: tuple[Dialect, ...] = ("postgres", "sqlite")
    for dialect in dialects:
        assert load_migrations(dialect)[OLD].name == "schema_repeatables"


def _old_sqlite_install(path: Path) -> None:
    """Migrations 1-15 applied as the code before repeatable files applied them."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
        for migration in load_migrations("sqlite")[:OLD]:
            for statement in split_statements(migration.sql):
                db.execute(statement)
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (migration.version,))
        db.execute("COMMIT")
    finally:
        db.close()


def _sqlite_schema(path: Path) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name"
        ).fetchall()
    finally:
        db.close()


async def _migrate(url: str, schema: str | None = None) -> list[int]:
    storage = await (PostgresStorage.open(url, schema=schema) if schema else open_storage(url))
    try:
        return await storage.database.migrate()
    finally:
        await storage.close()


async def test_an_old_sqlite_install_gets_the_views_of_a_fresh_one(tmp_path: Path) -> None:
    old, fresh = tmp_path / "old.db", tmp_path / "fresh.db"
    _old_sqlite_install(old)
    assert await _migrate(f"sqlite:///{old}") == LATEST[OLD:]
    assert await _migrate(f"sqlite:///{fresh}") == LATEST
    assert _sqlite_schema(old) == _sqlite_schema(fresh)
    assert [name for _, name, _ in _sqlite_schema(fresh)] == ["task_view"]


async def _old_postgres_install(url: str, schema: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(f'CREATE SCHEMA "{schema}"')
            await conn.execute(f'SET LOCAL search_path = "{schema}", pg_temp')
            await conn.execute(
                "CREATE TABLE schema_version (version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for migration in load_migrations("postgres")[:OLD]:
                if not migration.is_empty:
                    await conn.execute(migration.for_schema(schema))
                await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", migration.version)
    finally:
        await conn.close()


async def _postgres_views(url: str, schema: str) -> list[tuple[str, str, list[str]]]:
    """Each view's definition as PostgreSQL prints it (relations named as its schema's
    search_path sees them) and its columns with their types."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'SET search_path = "{schema}", pg_temp')
        rows = await conn.fetch(
            "SELECT c.relname, pg_get_viewdef(c.oid, true) AS definition,"
            " array(SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            "       WHERE a.attrelid = c.oid AND a.attnum > 0 ORDER BY a.attnum) AS columns"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'v' AND n.nspname = $1 ORDER BY c.relname",
            schema,
        )
        return [(row["relname"], row["definition"], list(row["columns"])) for row in rows]
    finally:
        await conn.close()


async def _postgres_functions(url: str, schema: str) -> dict[str, tuple[str, object]]:
    """Each function's definition (the schema's name written @schema@, as the files do) and
    what is granted on it."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT p.oid::regprocedure::text AS signature, pg_get_functiondef(p.oid) AS definition,"
            " p.proacl::text[] AS acl FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = $1",
            schema,
        )
    finally:
        await conn.close()

    def unnamed(text: str) -> str:
        return text.replace(f'"{schema}"', "@schema@").replace(f"{schema}.", "@schema@.")

    return {unnamed(row["signature"]): (unnamed(row["definition"]), row["acl"]) for row in rows}


@pytest.mark.postgres
async def test_an_old_postgres_install_gets_the_views_of_a_fresh_one(pg_fresh_db: str) -> None:
    await _old_postgres_install(pg_fresh_db, "old_install")
    [(_, _, old_columns)] = await _postgres_views(pg_fresh_db, "old_install")
    assert await _migrate(pg_fresh_db, "old_install") == LATEST[OLD:]
    assert await _migrate(pg_fresh_db, "fresh_install") == LATEST
    upgraded = await _postgres_views(pg_fresh_db, "old_install")
    assert upgraded == await _postgres_views(pg_fresh_db, "fresh_install")
    [(name, _, columns)] = upgraded
    # CREATE OR REPLACE kept the view: its columns as the old code left them, then any new ones.
    assert name == "task_view" and columns[: len(old_columns)] == old_columns


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def unmigrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    url: str = request.getfixturevalue("pg_fresh_db")
    return url


async def _fetch(url: str, sql: str) -> list[tuple[object, ...]]:
    if url.startswith("sqlite"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return db.execute(sql).fetchall()
        finally:
            db.close()
    conn = await asyncpg.connect(url)
    try:
        return [tuple(row) for row in await conn.fetch(sql)]
    finally:
        await conn.close()


async def test_a_changed_file_runs_again_once_and_an_unchanged_one_not(
    unmigrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = unmigrated_url
    dialect: Dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    packaged = load_repeatables(dialect)
    probe = PROBE
    monkeypatch.setattr(migrator, "load_repeatables", lambda dialect: [*packaged, probe])

    async def runs() -> int:
        return len(await _fetch(url, "SELECT n FROM probe_runs"))

    async def recorded() -> dict[object, object]:
        return {row[0]: row[1] for row in await _fetch(url, "SELECT name, sha256 FROM schema_repeatables")}

    assert await _migrate(url) != []  # the numbered migrations, then every repeatable file
    assert await runs() == 1
    assert await recorded() == {r.name: r.sha256 for r in [*packaged, probe]}
    assert await _migrate(url) == []
    assert await runs() == 1  # unchanged: not run again
    probe = Repeatable(PROBE.name, PROBE.sql + "-- changed\n")
    assert await _migrate(url) == []
    assert await runs() == 2  # changed: run again, once
    assert (await recorded())[probe.name] == probe.sha256 != PROBE.sha256
    assert await _migrate(url) == []
    assert await runs() == 2


async def test_a_migration_that_drops_a_view_gets_it_back(
    unmigrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After numbered migrations, every repeatable file runs, changed or not: a migration
    may drop a view to change a column it reads, and the file creates it again."""
    url = unmigrated_url
    dialect: Dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    assert await _migrate(url) != []
    packaged = load_migrations(dialect)
    drop = migrator.Migration(len(packaged) + 1, "drop_view", "DROP VIEW task_view;\n")
    monkeypatch.setattr(migrator, "load_migrations", lambda dialect: [*packaged, drop])
    assert await _migrate(url) == [drop.version]
    assert await _fetch(url, "SELECT count(*) FROM task_view") == [(0,)]


@pytest.mark.postgres
async def test_an_old_postgres_install_keeps_its_functions_and_their_grants(pg_fresh_db: str) -> None:
    """The functions file replaces each function by the same one: an upgraded install has a
    fresh one's definitions, and keeps what an administrator granted (docs/sql-enqueue.md)."""
    await _old_postgres_install(pg_fresh_db, "old_install")
    admin = await asyncpg.connect(pg_fresh_db)
    try:  # a predefined role: nothing to create or drop (the grant goes with the database)
        await admin.execute(
            "GRANT EXECUTE ON FUNCTION old_install.enqueue_task, old_install.publish_event TO pg_monitor"
        )
    finally:
        await admin.close()
    as_the_old_code_left_them = await _postgres_functions(pg_fresh_db, "old_install")
    assert await _migrate(pg_fresh_db, "old_install") == LATEST[OLD:]
    assert await _migrate(pg_fresh_db, "fresh_install") == LATEST
    upgraded = await _postgres_functions(pg_fresh_db, "old_install")
    fresh = await _postgres_functions(pg_fresh_db, "fresh_install")
    assert {name: definition for name, (definition, _) in upgraded.items()} == {
        name: definition for name, (definition, _) in fresh.items()
    }
    assert {name: acl for name, (_, acl) in upgraded.items()} == {
        name: acl for name, (_, acl) in as_the_old_code_left_them.items()
    }
    granted = [name for name, (_, acl) in upgraded.items() if any("pg_monitor=X" in a for a in acl or [])]
    assert sorted(name.split("(")[0] for name in granted) == [
        "@schema@.enqueue_task",
        "@schema@.publish_event",
    ]
    assert len(upgraded) == 25  # the claim's rules (5), enqueue's helpers and functions (16), counts' (4)
