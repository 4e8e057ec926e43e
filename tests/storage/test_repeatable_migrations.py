"""Repeatable files (workly/migrations/<dialect>/repeatable/): run after the numbered
migrations when their revision is above the recorded one (never when it is below: an older
process of a rolling upgrade), recorded in schema_repeatables; an install the old numbered
migrations made comes out with the definitions they left, and keeps the grants on its
functions; a role that may not replace a definition is told which, before anything runs."""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from workly.errors import ConfigError
from workly.storage import migrator
from workly.storage.factory import open_storage
from workly.storage.migrator import Repeatable, load_migrations, load_repeatables
from workly.storage.postgres import PostgresStorage
from workly.storage.queries import Dialect
from workly.storage.sqlite.statements import split_statements

# The numbered migrations before repeatable files existed: what the old code applied.
OLD = 15
ROOT = Path(__file__).resolve().parents[2]
LATEST = [m.version for m in load_migrations("postgres")]
DIALECTS: tuple[Dialect, ...] = ("postgres", "sqlite")
# The functions and views (as _postgres_functions and _postgres_views name them) whose
# definition the files changed from what migrations 1-15 left. A change to one adds it
# here (a function whose arguments changed is another function: its new signature, as
# _postgres_functions prints it).
CHANGED_SINCE_OLD: set[str] = {
    # Reserved names refused (workly/reserved_names.py): a queue workly.*, a key schedule:….
    "@schema@.workly_check_keys(text,text,text)",
    "@schema@.enqueue_task(text,text,text,jsonb,jsonb,text,double precision,timestamp with time zone,bigint,"
    "text,text,text,bigint,double precision,text[],double precision,double precision,double precision,"
    "text,text)",
    # Event labels, filters, envelopes and strict mode (migration 0019: labels is a new argument).
    "@schema@.publish_event(text,jsonb,text,text,text,text,double precision,timestamp with time zone,"
    "text,text,jsonb)",
    "@schema@.workly_check_labels(jsonb)",
    # A test delivery shows test (migration 0019).
    "task_view",
}
# Functions later numbered migrations added (by name, as _names gives them).
ADDED_SINCE_16 = {"@schema@.workly_check_labels"}


def _probe(revision: int, extra: str = "") -> Repeatable:
    """A file that counts its runs in a table of its own."""
    sql = "CREATE TABLE IF NOT EXISTS probe_runs (n integer);\nINSERT INTO probe_runs VALUES (1);\n"
    return Repeatable.read("zz_probe", f"-- revision: {revision}\n{sql}{extra}")


def test_the_repeatable_files_came_with_migration_16() -> None:
    assert [r.name for r in load_repeatables("postgres")] == [
        "claim_rules", "enqueue_checks", "enqueue_functions", "task_counts", "views",
    ]  # fmt: skip
    assert [r.name for r in load_repeatables("sqlite")] == ["views"]  # SQLite has no SQL functions
    for dialect in DIALECTS:
        assert load_migrations(dialect)[OLD].name == "schema_repeatables"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_each_change_raises_the_revision() -> None:
    """Every version of each file along main's line (first parents: a merge is one step), and
    the working copy: a change without a raised revision would never run on an install that
    ran the file before."""
    if not (ROOT / ".git").exists():
        message = "not a git checkout: the test reads the files' history"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    assert _git("rev-parse", "--is-shallow-repository").strip() == "false", (
        "a shallow clone holds no history to compare: `git fetch --unshallow` first"
    )
    for dialect in DIALECTS:
        for repeatable in load_repeatables(dialect):
            path = f"workly/migrations/{dialect}/repeatable/{repeatable.name}.sql"
            commits = _git("log", "--first-parent", "--format=%H", "--", path).split()
            texts = [_git("show", f"{c}:{path}") for c in reversed(commits)]
            # From the first version with a revision line (views.sql had none before 0017).
            first = next((n for n, text in enumerate(texts) if text.startswith("-- revision:")), len(texts))
            versions = [Repeatable.read(repeatable.name, text) for text in texts[first:]]
            versions.append(repeatable)  # the working copy, changes not yet committed among them
            for before, after in itertools.pairwise(versions):
                assert after.sql == before.sql or after.revision > before.revision, (
                    f"{path} changed without its first line raised above '-- revision: {before.revision}'"
                )


def test_a_file_without_a_revision_is_refused(tmp_path: Path) -> None:
    (tmp_path / "views.sql").write_text("-- revision: 2\nSELECT 1;\n")
    assert [r.revision for r in load_repeatables("sqlite", tmp_path)] == [2]
    (tmp_path / "views.sql").write_bytes(
        "\ufeff-- revision: 3\r\nSELECT 1;\r\n".encode()
    )  # a Windows editor's
    [crlf] = load_repeatables("sqlite", tmp_path)
    assert (crlf.revision, crlf.sql) == (3, "-- revision: 3\nSELECT 1;\n")
    for first_line in ("-- The views", "-- revision: 0", "-- revision: two", " -- revision: 1"):
        (tmp_path / "views.sql").write_text(f"{first_line}\nSELECT 1;\n")
        with pytest.raises(RuntimeError, match=r"'views' does not begin with '-- revision: N'"):
            load_repeatables("sqlite", tmp_path)


def _old_sqlite_install(path: Path, upto: int = OLD) -> None:
    """Migrations 1-``upto`` applied as the code before repeatable files applied them."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT)")
        for migration in load_migrations("sqlite")[:upto]:
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


async def _old_postgres_install(url: str, schema: str, upto: int = OLD) -> None:
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(f'CREATE SCHEMA "{schema}"')
            await conn.execute(f'SET LOCAL search_path = "{schema}", pg_temp')
            await conn.execute(
                "CREATE TABLE schema_version (version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for migration in load_migrations("postgres")[:upto]:
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


def _name(signature: str) -> str:
    return signature.split("(")[0]


def _names(functions: dict[str, object]) -> set[str]:
    return {_name(signature) for signature in functions}


@pytest.mark.postgres
async def test_an_old_postgres_install_gets_the_views_of_a_fresh_one(pg_fresh_db: str) -> None:
    await _old_postgres_install(pg_fresh_db, "old_install")
    [(_, old_definition, old_columns)] = await _postgres_views(pg_fresh_db, "old_install")
    assert await _migrate(pg_fresh_db, "old_install") == LATEST[OLD:]
    assert await _migrate(pg_fresh_db, "fresh_install") == LATEST
    upgraded = await _postgres_views(pg_fresh_db, "old_install")
    assert upgraded == await _postgres_views(pg_fresh_db, "fresh_install")
    [(name, definition, columns)] = upgraded
    # CREATE OR REPLACE kept the view: its columns as the old code left them, then any new ones.
    assert name == "task_view" and columns[: len(old_columns)] == old_columns
    if name not in CHANGED_SINCE_OLD:
        assert definition == old_definition


async def test_an_sqlite_install_of_hashes_gets_revisions(tmp_path: Path) -> None:
    """Migration 16 as the code of one file per dialect's views left it: a hash, no revision."""
    path = tmp_path / "16.db"
    _old_sqlite_install(path, upto=OLD + 1)
    db = sqlite3.connect(path)
    db.execute("INSERT INTO schema_repeatables (name, sha256) VALUES ('views', 'e3b0')")
    db.commit()
    db.close()
    assert await _migrate(f"sqlite:///{path}") == LATEST[OLD + 1 :]
    rows = await _fetch(f"sqlite:///{path}", "SELECT name, revision FROM schema_repeatables")
    assert rows == [(r.name, r.revision) for r in load_repeatables("sqlite")]


@pytest.mark.postgres
async def test_a_postgres_install_of_one_functions_file_gets_one_per_concern(pg_fresh_db: str) -> None:
    """Migration 16 as the code of one functions file left it: its row goes, each new file's
    row comes with its revision, and the functions are the same ones."""
    await _old_postgres_install(pg_fresh_db, "at_16", upto=OLD + 1)
    conn = await asyncpg.connect(pg_fresh_db)
    try:
        await conn.execute(
            "INSERT INTO at_16.schema_repeatables (name, sha256)"
            " VALUES ('functions', 'e3b0'), ('views', 'e3b0')"
        )
    finally:
        await conn.close()
    before = await _postgres_functions(pg_fresh_db, "at_16")
    assert await _migrate(pg_fresh_db, "at_16") == LATEST[OLD + 1 :]
    rows = await _fetch(pg_fresh_db, "SELECT name, revision FROM at_16.schema_repeatables ORDER BY name")
    assert rows == [(r.name, r.revision) for r in load_repeatables("postgres")]
    # The same functions (by name: a later migration may give one new arguments).
    assert _names(await _postgres_functions(pg_fresh_db, "at_16")) == _names(before) | ADDED_SINCE_16


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


async def test_a_newer_revision_runs_once_and_an_older_one_never(
    unmigrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = unmigrated_url
    dialect: Dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    packaged = load_repeatables(dialect)
    probe = _probe(1)
    monkeypatch.setattr(migrator, "load_repeatables", lambda dialect: [*packaged, probe])

    async def runs() -> int:
        return len(await _fetch(url, "SELECT n FROM probe_runs"))

    async def recorded() -> dict[object, tuple[object, object]]:
        rows = await _fetch(url, "SELECT name, revision, sha256 FROM schema_repeatables")
        return {row[0]: (row[1], row[2]) for row in rows}

    assert await _migrate(url) != []  # the numbered migrations, then every repeatable file
    assert await runs() == 1
    assert await recorded() == {r.name: (r.revision, r.sha256) for r in [*packaged, probe]}
    assert await _migrate(url) == []
    assert await runs() == 1  # the same revision: not run again
    probe = _probe(2, "-- changed\n")
    assert await _migrate(url) == []
    assert await runs() == 2  # a newer revision: run again, once
    assert (await recorded())[probe.name] == (2, probe.sha256)
    assert await _migrate(url) == []
    assert await runs() == 2
    # A process of the older version starts during a rolling upgrade: its older file stays unrun.
    probe = _probe(1)
    assert await _migrate(url) == []
    assert await runs() == 2
    assert (await recorded())[probe.name] == (2, _probe(2, "-- changed\n").sha256)


async def test_an_older_file_with_newer_migrations_is_refused_and_changes_nothing(
    unmigrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release branched before a file's fix, with a migration of its own: running its older
    file after its migration would put the bug back. Refused before the migrations run."""
    url = unmigrated_url
    dialect: Dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    packaged, migrations = load_repeatables(dialect), load_migrations(dialect)
    probe = _probe(2)
    monkeypatch.setattr(migrator, "load_repeatables", lambda dialect: [*packaged, probe])
    assert await _migrate(url) == LATEST
    probe = _probe(1)
    # A migration that fails if it runs: the refusal comes before the numbered migrations.
    extra = migrator.Migration(len(migrations) + 1, "next", "SELECT n FROM no_such_table;\n")
    monkeypatch.setattr(migrator, "load_migrations", lambda dialect: [*migrations, extra])
    with pytest.raises(ConfigError, match=r"zz_probe\.sql is revision 1, the database ran 2"):
        await _migrate(url)
    assert await _fetch(url, "SELECT max(version) FROM schema_version") == [(len(migrations),)]
    assert await _fetch(url, "SELECT count(*) FROM probe_runs") == [(1,)]


async def test_an_older_process_on_a_newer_schema_runs_no_file(
    unmigrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = unmigrated_url
    dialect: Dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    packaged, migrations = load_repeatables(dialect), load_migrations(dialect)
    probe = _probe(1)
    monkeypatch.setattr(migrator, "load_repeatables", lambda dialect: [*packaged, probe])
    assert await _migrate(url) == LATEST
    # The version before: one migration fewer, and (a test's liberty) a newer file.
    probe = _probe(2)
    monkeypatch.setattr(migrator, "load_migrations", lambda dialect: migrations[:-1])
    assert await _migrate(url) == []
    assert await _fetch(url, "SELECT count(*) FROM probe_runs") == [(1,)]


async def test_a_change_without_a_raised_revision_is_not_run_and_said(
    unmigrated_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    url = unmigrated_url
    dialect: Dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    packaged = load_repeatables(dialect)
    probe = _probe(1)
    monkeypatch.setattr(migrator, "load_repeatables", lambda dialect: [*packaged, probe])
    assert await _migrate(url) == LATEST
    probe = _probe(1, "-- changed\n")
    with caplog.at_level(logging.WARNING, logger="workly.migrations"):
        assert await _migrate(url) == []
    assert await _fetch(url, "SELECT count(*) FROM probe_runs") == [(1,)]
    [warning] = [r.getMessage() for r in caplog.records if r.name == "workly.migrations"]
    assert "zz_probe.sql differs from the one the database ran at the same revision" in warning


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
    changed = {
        name
        for name, (definition, _) in upgraded.items()
        if name not in as_the_old_code_left_them or definition != as_the_old_code_left_them[name][0]
    }
    assert changed == CHANGED_SINCE_OLD & set(upgraded)
    # Grants kept, also on a function a migration gave new arguments (compared by name).
    kept = {_name(name): acl for name, (_, acl) in upgraded.items() if _name(name) not in ADDED_SINCE_16}
    assert kept == {_name(name): acl for name, (_, acl) in as_the_old_code_left_them.items()}
    granted = [name for name, (_, acl) in upgraded.items() if any("pg_monitor=X" in a for a in acl or [])]
    assert sorted(name.split("(")[0] for name in granted) == [
        "@schema@.enqueue_task",
        "@schema@.publish_event",
    ]
    assert len(upgraded) == 26  # the claim's rules (5), enqueue's helpers and functions (17), counts' (4)


@pytest.mark.postgres
async def test_a_role_that_does_not_own_the_definitions_is_told_which_before_anything_runs(
    pg_fresh_db: str,
) -> None:
    """CREATE OR REPLACE needs the owner: an operator who gave a function or the view to
    another role gets every one named, before the numbered migrations or the files run, and
    the schema as it was. What is not Workly's in the schema (an extension's function, an
    application's view) is none of its business."""
    admin = await asyncpg.connect(pg_fresh_db)
    migrating = f"workly_test_migrator_{secrets.token_hex(6)}"
    database = await admin.fetchval("SELECT current_database()")
    await admin.execute(f'CREATE ROLE "{migrating}" LOGIN')
    try:
        await admin.execute(f'GRANT CREATE ON DATABASE "{database}" TO "{migrating}"')
        parts = urlsplit(pg_fresh_db)
        url = urlunsplit(parts._replace(netloc=f"{migrating}@{parts.hostname}:{parts.port or 5432}"))
        await _old_postgres_install(url, "owned")  # as the migrating role: it owns what it made
        await admin.execute("CREATE FUNCTION owned.not_workly() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        await admin.execute("CREATE VIEW owned.not_workly_either AS SELECT 1 AS n")
        for given in (
            "FUNCTION owned.claim_burst(double precision)",
            "VIEW owned.task_view",
            "FUNCTION owned.not_workly()",
            "VIEW owned.not_workly_either",
        ):
            await admin.execute(f"ALTER {given} OWNER TO pg_monitor")

        async def refusal() -> str:
            with pytest.raises(ConfigError) as refused:
                await _migrate(url, "owned")
            message = str(refused.value)
            assert "function owned.claim_burst(rate_limit double precision) (owner pg_monitor)" in message
            assert "view owned.task_view (owner pg_monitor)" in message
            assert "not_workly" not in message and "enqueue_task" not in message
            return message

        assert "OWNER TO" in await refusal()  # an upgrade: before its numbered migrations
        assert await admin.fetchval("SELECT max(version) FROM owned.schema_version") == OLD

        async def give_back() -> None:
            for given in ("FUNCTION owned.claim_burst(double precision)", "VIEW owned.task_view"):
                await admin.execute(f'ALTER {given} OWNER TO "{migrating}"')

        await give_back()
        assert await _migrate(url, "owned") == LATEST[OLD:]
        for given in ("FUNCTION owned.claim_burst(double precision)", "VIEW owned.task_view"):
            await admin.execute(f"ALTER {given} OWNER TO pg_monitor")
        await admin.execute("UPDATE owned.schema_repeatables SET revision = 0")  # files of a newer revision
        await refusal()
        assert await admin.fetch("SELECT DISTINCT revision FROM owned.schema_repeatables") == [(0,)]
        await give_back()
        assert await _migrate(url, "owned") == []
        recorded = await admin.fetch("SELECT name, revision FROM owned.schema_repeatables ORDER BY name")
        files = load_repeatables("postgres")
        assert [tuple(row) for row in recorded] == [(r.name, r.revision) for r in files]
    finally:
        await admin.execute("DROP SCHEMA IF EXISTS owned CASCADE")
        await admin.execute(f'DROP OWNED BY "{migrating}"')
        await admin.execute(f'DROP ROLE "{migrating}"')
        await admin.close()
