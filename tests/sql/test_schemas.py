"""Workly in a schema of the application's database (WORKLY_DATABASE_SCHEMA).

Workly's tables and functions live in their schema alone: an application's tables of the
same names elsewhere are left as they were, two installs in two schemas of one database
neither see nor wake each other, an existing install stays in ``public``, and a schema
name Workly could not use safely is refused before anything connects.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import ValidationError

from tests.support.servers import TEST_SECRET, TEST_TOKEN, free_port, in_process
from workly.config import Settings
from workly.errors import ConfigError
from workly.storage.migrator import load_migrations
from workly.storage.postgres import PostgresStorage
from workly.storage.postgres.notifier import CHANNEL, channel_of

HOOK = "http://127.0.0.1:9/hook"
ALL_MIGRATIONS = [m.version for m in load_migrations("postgres")]
LATEST = ALL_MIGRATIONS[-1]
NEVER_CONNECTED = "postgresql://postgres@127.0.0.1:1/never_connected"


def settings(url: str, schema: str) -> Settings:
    return Settings(database_url=url, database_schema=schema, signing_secret=TEST_SECRET, dispatch=False)


@asynccontextmanager
async def migrated(url: str, schema: str | None = None) -> AsyncIterator[tuple[PostgresStorage, list[int]]]:
    """A storage in ``schema`` (the default when None), migrated: it and the versions applied."""
    storage = await (
        PostgresStorage.open(url) if schema is None else PostgresStorage.open(url, schema=schema)
    )
    try:
        yield storage, await storage.database.migrate()
    finally:
        await storage.close()


async def enqueue_through_api(http: httpx.AsyncClient, queue: str, body: Any) -> str:
    response = await http.post(f"/v1/queues/{queue}/tasks", json={"url": HOOK, "body": body})
    assert response.status_code == 201, response.text
    task_id: str = response.json()["id"]
    return task_id


async def queue_names(http: httpx.AsyncClient) -> list[str]:
    response = await http.get("/v1/queues")
    assert response.status_code == 200, response.text
    return [queue["name"] for queue in response.json()["queues"]]


async def public_snapshot(conn: asyncpg.Connection) -> dict[str, Any]:
    """What the application has in ``public``: its relations, functions, columns and rows."""
    return {
        "relations": await conn.fetch(
            "SELECT relname, relkind FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "ORDER BY relname"
        ),
        "functions": await conn.fetch(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1"
        ),
        "columns": await conn.fetch(
            "SELECT table_name, column_name, data_type, column_default, is_nullable "
            "FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY table_name, ordinal_position"
        ),
        "tasks": await conn.fetch("SELECT * FROM public.tasks ORDER BY id"),
        "queues": await conn.fetch("SELECT * FROM public.queues ORDER BY name"),
    }


async def test_workly_leaves_the_applications_tables_of_the_same_names_alone(pg_fresh_db: str) -> None:
    app = await asyncpg.connect(pg_fresh_db)  # the application's connection: default search_path
    try:
        await app.execute(
            "CREATE TABLE tasks (id serial PRIMARY KEY, title text);"
            "CREATE TABLE queues (name text PRIMARY KEY, note text);"
            "INSERT INTO tasks (title) VALUES ('write the docs'), ('ship it');"
            "INSERT INTO queues VALUES ('orders', 'the application''s own'), ('emails', 'also its own');"
        )
        before = await public_snapshot(app)

        async with migrated(pg_fresh_db, "workly") as (_, applied):
            assert applied == ALL_MIGRATIONS
        async with in_process(settings(pg_fresh_db, "workly")) as (_, http):
            api_id = await enqueue_through_api(http, "orders", {"order": 1})
            sql_id = await app.fetchval("SELECT workly.enqueue_task(queue => 'orders', url => $1)", HOOK)
            assert (await http.get(f"/v1/tasks/{sql_id}")).json()["queue"] == "orders"
            assert await queue_names(http) == ["orders"]  # not the application's 'emails'

        assert await public_snapshot(app) == before
        stored = await app.fetch("SELECT id, queue FROM workly.tasks ORDER BY id")
        assert [tuple(r) for r in stored] == sorted([(api_id, "orders"), (sql_id, "orders")])
        # The application goes on with its own tables, named as it always named them.
        assert await app.fetchval("INSERT INTO tasks (title) VALUES ('after workly') RETURNING id") == 3
        assert await app.fetchval("SELECT array_agg(title ORDER BY id) FROM tasks") == [
            "write the docs",
            "ship it",
            "after workly",
        ]
    finally:
        await app.close()


async def test_two_installs_in_two_schemas_of_one_database_are_apart(pg_fresh_db: str) -> None:
    async with migrated(pg_fresh_db, "alpha") as (alpha, alpha_applied):
        async with migrated(pg_fresh_db, "beta") as (beta, beta_applied):
            # Each has its own schema_version: beta is migrated in full after alpha was.
            assert alpha_applied == beta_applied == ALL_MIGRATIONS
            assert await alpha.database.migrate() == [] and await beta.database.migrate() == []
            assert await alpha.database.schema_version() == await beta.database.schema_version() == LATEST
            # Each process listens and announces on its install's channel.
            assert (alpha.notifier.channel, beta.notifier.channel) == (
                "workly_work.alpha",
                "workly_work.beta",
            )

        conn = await asyncpg.connect(pg_fresh_db)
        try:
            for schema in ("alpha", "beta"):
                versions = await conn.fetchval(
                    f"SELECT array_agg(version ORDER BY version) FROM {schema}.schema_version"
                )
                assert versions == ALL_MIGRATIONS, schema
            assert await conn.fetchval("SELECT to_regclass('public.schema_version')") is None

            async with (
                in_process(settings(pg_fresh_db, "alpha")) as (_, alpha_http),
                in_process(settings(pg_fresh_db, "beta")) as (_, beta_http),
            ):
                alpha_id = await enqueue_through_api(alpha_http, "billing", {"to": "alpha"})
                beta_id = await enqueue_through_api(beta_http, "emails", {"to": "beta"})
                # Each install's own SQL function writes into its own schema.
                alpha_sql_id = await conn.fetchval(
                    "SELECT alpha.enqueue_task(queue => 'billing', url => $1)", HOOK
                )

                assert await queue_names(alpha_http) == ["billing"]
                assert await queue_names(beta_http) == ["emails"]
                for own, other, task_id in (
                    (alpha_http, beta_http, alpha_id),
                    (alpha_http, beta_http, alpha_sql_id),
                    (beta_http, alpha_http, beta_id),
                ):
                    assert (await own.get(f"/v1/tasks/{task_id}")).status_code == 200
                    assert (await other.get(f"/v1/tasks/{task_id}")).status_code == 404
            assert await conn.fetchval("SELECT count(*) FROM alpha.tasks") == 2
            assert await conn.fetchval("SELECT count(*) FROM beta.tasks") == 1
        finally:
            await conn.close()


def test_each_schema_has_its_own_wakeup_channel() -> None:
    assert channel_of("public") == CHANNEL == "workly_work"  # installs from before keep theirs
    assert len({channel_of("public"), channel_of("alpha"), channel_of("beta")}) == 3
    # The longest names fit a channel's 63 bytes and stay apart, though they share 40 characters.
    longest = ["x" * 62 + "a", "x" * 62 + "b"]
    channels = [channel_of(name) for name in longest]
    assert channels[0] != channels[1] and all(len(c.encode()) <= 63 for c in channels)


async def test_the_default_schema_is_public(pg_fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("WORKLY_"):
            monkeypatch.delenv(name)
    assert Settings(database_url=pg_fresh_db).database_schema == "public"

    conn = await asyncpg.connect(pg_fresh_db)
    try:
        schemas = "SELECT array_agg(nspname ORDER BY nspname) FROM pg_namespace"
        before = await conn.fetchval(schemas)
        async with migrated(pg_fresh_db) as (storage, applied):  # opened as every existing install opens it
            assert applied == ALL_MIGRATIONS
            assert storage.notifier.channel == "workly_work"
        assert await conn.fetchval(schemas) == before  # no schema created
        for table in ("tasks", "queues", "schema_version", "sql_arrivals"):
            assert await conn.fetchval("SELECT to_regclass($1)::text", f"public.{table}") == table
        config = await conn.fetchval(
            "SELECT proconfig FROM pg_proc WHERE oid = 'public.enqueue_task'::regproc"
        )
        assert config == ["search_path=pg_catalog, pg_temp", "standard_conforming_strings=on"]
        # Naming public explicitly is the same install: nothing left to apply.
        async with migrated(pg_fresh_db, "public") as (_, applied):
            assert applied == []
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "name", ["Bad-Name", "pg_x", "Workly", "1st", "", "a" * 64, 'x"; DROP SCHEMA public; --']
)
async def test_a_schema_name_workly_cannot_use_is_refused(name: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(database_url=NEVER_CONNECTED, database_schema=name)
    message = refused.value.errors()[0]["msg"]
    assert (
        f"WORKLY_DATABASE_SCHEMA {name!r} must be 1-63 lower-case letters, digits and underscores" in message
    )
    assert "not starting with a digit or pg_" in message
    # The storage refuses it too, before connecting (the URL's port 1 would fail otherwise).
    with pytest.raises(ConfigError, match="WORKLY_DATABASE_SCHEMA"):
        await PostgresStorage.open(NEVER_CONNECTED, schema=name)


@pytest.mark.parametrize("name", ["workly", "public", "_w", "app_2", "a" * 63])
def test_a_lower_case_schema_name_is_taken(name: str) -> None:
    assert Settings(database_url=NEVER_CONNECTED, database_schema=name).database_schema == name


def test_a_schema_is_refused_with_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'workly.db'}"
    with pytest.raises(ValidationError, match="WORKLY_DATABASE_SCHEMA applies to PostgreSQL only; unset it"):
        Settings(database_url=url, database_schema="workly")
    assert Settings(database_url=url, database_schema="public").database_schema == "public"


async def workly_cli(*args: str, **env: str) -> tuple[int, str, str]:
    """The installed ``workly`` script, with no WORKLY_* variable but ``env``: exit code, out, err."""
    script = Path(sys.executable).with_name("workly")
    assert script.is_file(), script
    base = {name: value for name, value in os.environ.items() if not name.startswith("WORKLY_")}
    process = await asyncio.create_subprocess_exec(
        script, *args, env={**base, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    except TimeoutError:
        process.kill()  # this test's own process, by its handle
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_workly_migrate_creates_the_schema_and_its_tables(pg_fresh_db: str) -> None:
    env = {"WORKLY_DATABASE_URL": pg_fresh_db, "WORKLY_DATABASE_SCHEMA": "workly"}
    code, out, err = await workly_cli("migrate", **env)
    assert code == 0, err
    assert out.strip() == f"applied {ALL_MIGRATIONS}; schema version {LATEST} in schema workly"

    conn = await asyncpg.connect(pg_fresh_db)
    try:
        tables = await conn.fetchval(
            "SELECT array_agg(table_name::text ORDER BY table_name) FROM information_schema.tables "
            "WHERE table_schema = $1 AND table_type = 'BASE TABLE'",
            "workly",
        )
        assert {"tasks", "queues", "events", "endpoints", "attempts", "schema_version", "sql_limits"} <= set(
            tables
        )
        assert (
            await conn.fetchval("SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace")
            == 0
        )
        assert await conn.fetchval("SELECT max(version) FROM workly.schema_version") == LATEST
        assert await conn.fetchval("SELECT to_regprocedure('workly.workly_new_id(text)') IS NOT NULL")
    finally:
        await conn.close()

    code, out, err = await workly_cli("migrate", **env)
    assert (code, out.strip()) == (0, f"up to date (version {LATEST} in schema workly)"), err

    # Forgotten on one command: no second, empty install in public, and a message that says why.
    code, out, err = await workly_cli("migrate", WORKLY_DATABASE_URL=pg_fresh_db)
    assert code == 2
    assert "WORKLY_DATABASE_SCHEMA=workly" in err and "Traceback" not in err
    serve_env = {"WORKLY_DATABASE_URL": pg_fresh_db, "WORKLY_SIGNING_SECRET": TEST_SECRET,
                 "WORKLY_API_TOKENS": TEST_TOKEN}  # fmt: skip
    code, out, err = await workly_cli("serve", "--host", "127.0.0.1", "--port", str(free_port()), **serve_env)
    assert code == 2, err  # refused before it listens: the port is never bound
    assert err.strip().startswith("workly: ") and err.strip().count("\n") == 0, err
    assert "WORKLY_DATABASE_SCHEMA=workly" in err
    assert await _count_schema_versions(pg_fresh_db) == 1


async def test_workly_migrate_refuses_a_bad_schema_name() -> None:
    code, out, err = await workly_cli(
        "migrate", WORKLY_DATABASE_URL=NEVER_CONNECTED, WORKLY_DATABASE_SCHEMA="Bad-Name"
    )
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert "WORKLY_DATABASE_SCHEMA" in line and "'Bad-Name'" in line and "Traceback" not in out + err


async def _count_schema_versions(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        found: int = await conn.fetchval("SELECT count(*) FROM pg_class WHERE relname = 'schema_version'")
        return found
    finally:
        await conn.close()
