"""An install from before migration 0011 upgrades in place: its endpoints' headers, which
earlier versions stored as a JSON string holding the object, become the object, and the SQL
functions read either form (a process of an earlier version may still write strings while
an upgrade rolls through)."""

from __future__ import annotations

import json

import asyncpg
import pytest

from workly.errors import ConfigError
from workly.storage.migrator import load_migrations
from workly.storage.postgres import PostgresStorage

ENDPOINT_HEADERS = {"x-team": "billing", "X-Order": "1"}
ALL = [migration.version for migration in load_migrations("postgres")]
AFTER_10 = [version for version in ALL if version > 10]


async def _apply_migrations_1_to_10(conn: asyncpg.Connection) -> None:
    """As a Workly of the previous release applied them: where the connection's search_path
    puts them."""
    await conn.execute(
        "CREATE TABLE schema_version (version integer PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for migration in load_migrations("postgres")[:10]:
        if not migration.is_empty:
            await conn.execute(migration.sql)
        await conn.execute("INSERT INTO schema_version (version) VALUES ($1)", migration.version)


async def _install_version_10(url: str) -> None:
    """Migrations 1-10 applied, as a Workly of the previous release left the database."""
    conn = await asyncpg.connect(url)
    try:
        await _apply_migrations_1_to_10(conn)
        await _add_endpoint(conn, "ep_old", json.dumps(json.dumps(ENDPOINT_HEADERS)))
    finally:
        await conn.close()


async def _add_endpoint(conn: asyncpg.Connection, endpoint_id: str, headers_json: str) -> None:
    await conn.execute(
        "INSERT INTO queues (name, created_at, updated_at) VALUES ($1, now(), now())", endpoint_id
    )
    await conn.execute(
        "INSERT INTO endpoints (id, url, headers, created_at, updated_at)"
        " VALUES ($1, 'http://127.0.0.1:9/hook', $2::text::json, now(), now())",
        endpoint_id,
        headers_json,
    )


async def test_the_upgrade_turns_endpoint_headers_into_objects(pg_fresh_db: str) -> None:
    await _install_version_10(pg_fresh_db)
    storage = await PostgresStorage.open(pg_fresh_db)
    try:
        assert await storage.database.migrate() == AFTER_10
        endpoint = await storage.webhooks.get_endpoint("ep_old")
        assert endpoint is not None and endpoint.spec.headers == ENDPOINT_HEADERS
    finally:
        await storage.close()
    conn = await asyncpg.connect(pg_fresh_db)
    try:
        assert (
            await conn.fetchval("SELECT json_typeof(headers) FROM endpoints WHERE id = 'ep_old'") == "object"
        )
        assert json.loads(await conn.fetchval("SELECT headers::text FROM endpoints")) == ENDPOINT_HEADERS
    finally:
        await conn.close()


async def test_publish_event_reads_headers_in_either_form(pg_fresh_db: str) -> None:
    storage = await PostgresStorage.open(pg_fresh_db)
    try:
        await storage.database.migrate()
    finally:
        await storage.close()
    conn = await asyncpg.connect(pg_fresh_db)
    try:
        await _add_endpoint(conn, "ep_string", json.dumps(json.dumps(ENDPOINT_HEADERS)))  # as 0.x wrote it
        await _add_endpoint(conn, "ep_object", json.dumps(ENDPOINT_HEADERS))
        event_id = await conn.fetchval(
            "SELECT publish_event(type => 'invoice.paid', payload => '{\"n\": 1}')"
        )
        rows = await conn.fetch(
            "SELECT endpoint_id, headers::text FROM tasks WHERE event_id = $1 ORDER BY endpoint_id", event_id
        )
    finally:
        await conn.close()
    expected = {**ENDPOINT_HEADERS, "content-type": "application/json"}
    assert [(row["endpoint_id"], json.loads(row["headers"])) for row in rows] == [
        ("ep_object", expected),
        ("ep_string", expected),
    ]


async def test_an_install_the_search_path_put_in_the_roles_schema_is_not_started_afresh(
    pg_fresh_db: str,
) -> None:
    """Before WORKLY_DATABASE_SCHEMA, tables went where the role's search_path put them: its
    "$user" schema, when one exists. Opening such a database with the default (public) must
    not make a second, empty install beside the first, and say what to set."""
    conn = await asyncpg.connect(pg_fresh_db)  # the default search_path: "$user", public
    try:
        user: str = await conn.fetchval("SELECT current_user")
        await conn.execute(f'CREATE SCHEMA "{user}"')
        await _apply_migrations_1_to_10(conn)
        assert await conn.fetchval("SELECT to_regclass('public.tasks')") is None  # all in "$user"
    finally:
        await conn.close()
    storage = await PostgresStorage.open(pg_fresh_db)
    try:
        with pytest.raises(ConfigError, match=f"WORKLY_DATABASE_SCHEMA={user}"):
            await storage.database.migrate()
    finally:
        await storage.close()
    storage = await PostgresStorage.open(pg_fresh_db, schema=user)
    try:
        assert await storage.database.migrate() == AFTER_10
    finally:
        await storage.close()


async def test_with_no_schema_configured_an_install_elsewhere_is_named_not_hidden(pg_fresh_db: str) -> None:
    """However a search_path once put an install in another schema (server, database, role or
    URL settings), Workly with no schema configured refuses to start afresh in public; naming
    a schema, public included, is a choice it follows."""
    storage = await PostgresStorage.open(pg_fresh_db, schema="legacy")
    try:
        await storage.database.migrate()
    finally:
        await storage.close()
    storage = await PostgresStorage.open(pg_fresh_db)
    try:
        with pytest.raises(ConfigError, match="WORKLY_DATABASE_SCHEMA=legacy"):
            await storage.database.migrate()
    finally:
        await storage.close()
    storage = await PostgresStorage.open(pg_fresh_db, schema="public")
    try:
        assert await storage.database.migrate() == ALL  # a second install, asked for
    finally:
        await storage.close()
