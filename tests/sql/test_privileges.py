"""Who may enqueue from SQL: the grants docs/sql-enqueue.md shows, and nothing more.

A role granted USAGE on Workly's schema and EXECUTE on enqueue_task and publish_event can
enqueue and publish (the functions run as their owner, SECURITY DEFINER), and can neither
read nor change any of Workly's tables, nor call the helper functions. The functions run
with their own search_path (pg_catalog, pg_temp) and name every Workly object with its
schema, so what a caller puts on its own path (a schema of look-alike tables, functions and
operators, temporary tables), or anyone who may create objects in Workly's schema puts
there, changes nothing they do.

Each role is a real LOGIN role with a unique name (roles are cluster-wide), dropped at the
end of the test whatever happened; the tests connect as it (the server trusts local users).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.sql.conftest import SCHEMA
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings

HOOK = "http://127.0.0.1:9/hook"
ORIGIN = "http://127.0.0.1:9"
TASK_ID = re.compile(r"task_[0-9A-HJKMNP-TV-Z]{26}")
ENQUEUE = "SELECT workly.enqueue_task(queue => $1, url => $2, body => $3::jsonb)"
PUBLISH = "SELECT workly.publish_event(type => $1, payload => $2::jsonb)"

# What docs/sql-enqueue.md tells an administrator to run (PostgreSQL 15 takes function
# names without their argument lists when only one function has the name).
DOC_GRANTS = (
    "GRANT USAGE ON SCHEMA workly TO {role}",
    "GRANT EXECUTE ON FUNCTION workly.enqueue_task, workly.publish_event TO {role}",
)
TABLES = ("tasks", "queues", "events", "endpoints", "attempts")


class Roles:
    """Creates LOGIN roles with unique names and connects as them; ``drop`` removes them all."""

    def __init__(self, db: str, admin: asyncpg.Connection) -> None:
        self.db = db
        self.admin = admin
        self._names: list[str] = []
        self._connections: list[asyncpg.Connection] = []

    async def create(self, *grants: str) -> str:
        name = f"workly_test_enqueuer_{secrets.token_hex(6)}"
        await self.admin.execute(f'CREATE ROLE "{name}" LOGIN')
        self._names.append(name)
        for grant in grants:
            await self.admin.execute(grant.format(role=f'"{name}"'))
        return name

    async def connect(self, role: str) -> asyncpg.Connection:
        conn = await asyncpg.connect(self.db, user=role)
        self._connections.append(conn)
        assert await conn.fetchval("SELECT current_user") == role
        return conn

    async def drop(self) -> None:
        for conn in self._connections:
            await conn.close()
        for name in self._names:
            try:  # its objects and the privileges granted to it in this database (the only one used)
                await self.admin.execute(f'DROP OWNED BY "{name}"')
            finally:
                await self.admin.execute(f'DROP ROLE "{name}"')


@pytest.fixture
async def roles(app_db: str) -> AsyncIterator[Roles]:
    admin = await asyncpg.connect(app_db)
    made = Roles(app_db, admin)
    try:
        yield made
    finally:
        try:
            await made.drop()
        finally:
            await admin.close()


def api_settings(db: str) -> Settings:
    """The Workly whose tables are in schema ``workly`` of ``db``: its API, no dispatching."""
    return Settings(database_url=db, database_schema=SCHEMA, signing_secret=TEST_SECRET, dispatch=False)


async def enqueue(conn: asyncpg.Connection, queue: str = "orders", body: str = '{"n": 1}') -> str:
    task_id: str = await conn.fetchval(ENQUEUE, queue, HOOK, body)
    return task_id


async def sqlstate_of(conn: asyncpg.Connection, statement: str) -> str:
    """The SQLSTATE ``statement`` fails with ('' when it succeeds)."""
    try:
        await conn.execute(statement)
    except asyncpg.PostgresError as exc:
        return str(exc.sqlstate)
    return ""


async def test_the_documented_grants_let_a_role_enqueue_and_publish(
    roles: Roles, app_conn: asyncpg.Connection
) -> None:
    enqueuer = await roles.connect(await roles.create(*DOC_GRANTS))
    task_id = await enqueue(enqueuer)
    event_id = await enqueuer.fetchval(PUBLISH, "invoice.paid", '{"total": 42}')

    # Stored in Workly's tables (read as the superuser) ...
    row = await app_conn.fetchrow("SELECT queue, url, status, body FROM workly.tasks WHERE id = $1", task_id)
    assert row is not None and TASK_ID.fullmatch(task_id)
    assert (row["queue"], row["url"], row["status"], row["body"]) == ("orders", HOOK, "ready", b'{"n": 1}')
    assert await app_conn.fetchval("SELECT type FROM workly.events WHERE id = $1", event_id) == "invoice.paid"
    # ... where the Workly running in that schema finds them.
    async with in_process(api_settings(roles.db)) as (_, http):
        task = (await http.get(f"/v1/tasks/{task_id}")).json()
        assert (task["queue"], task["status"], task["body"]) == ("orders", "ready", {"n": 1})
        event = (await http.get(f"/v1/events/{event_id}")).json()
        assert (event["type"], event["payload"], event["deliveries"]) == ("invoice.paid", {"total": 42}, [])


async def test_an_event_the_role_publishes_reaches_an_endpoint_made_through_the_api(roles: Roles) -> None:
    async with in_process(api_settings(roles.db)) as (_, http):
        created = await http.post("/v1/endpoints", json={"url": HOOK, "event_types": ["invoice.*"]})
        assert created.status_code == 201, created.text
        enqueuer = await roles.connect(await roles.create(*DOC_GRANTS))
        event_id = await enqueuer.fetchval(PUBLISH, "invoice.paid", '{"total": 42}')
        event = (await http.get(f"/v1/events/{event_id}")).json()
        assert [d["endpoint_id"] for d in event["deliveries"]] == [created.json()["id"]]


async def test_the_role_can_neither_read_nor_change_workly_tables(
    roles: Roles, app_conn: asyncpg.Connection
) -> None:
    role = await roles.create(*DOC_GRANTS)
    enqueuer = await roles.connect(role)
    task_id = await enqueue(enqueuer)
    await enqueuer.fetchval(PUBLISH, "invoice.paid", "{}")
    before = {t: await app_conn.fetchval(f"SELECT count(*) FROM workly.{t}") for t in TABLES}

    statements = {
        "SELECT": "SELECT * FROM workly.{t}",
        "INSERT": "INSERT INTO workly.{t} DEFAULT VALUES",
        "UPDATE": "UPDATE workly.{t} SET {c} = {c}",
        "DELETE": "DELETE FROM workly.{t}",
        "TRUNCATE": "TRUNCATE workly.{t}",
    }
    first_column = {
        t: await app_conn.fetchval(
            "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 "
            "AND attidentity = '' AND attgenerated = '' ORDER BY attnum LIMIT 1",
            f"workly.{t}",
        )
        for t in TABLES
    }
    refused = {
        (verb, t): await sqlstate_of(enqueuer, sql.format(t=t, c=first_column[t]))
        for verb, sql in statements.items()
        for t in TABLES
    }
    assert refused == dict.fromkeys(refused, "42501")  # insufficient_privilege, every one
    assert {t: await app_conn.fetchval(f"SELECT count(*) FROM workly.{t}") for t in TABLES} == before
    assert before["tasks"] == 1 and await app_conn.fetchval("SELECT id FROM workly.tasks") == task_id

    # Not just those five: no privilege on any table, view or sequence of the schema.
    relations = await app_conn.fetch(
        "SELECT c.relname, c.relkind, CASE c.relkind WHEN 'S' THEN has_sequence_privilege($1, c.oid, "
        "'USAGE, SELECT, UPDATE') ELSE has_table_privilege($1, c.oid, 'SELECT, INSERT, UPDATE, DELETE, "
        "TRUNCATE, REFERENCES, TRIGGER') END AS allowed "
        "FROM pg_class c WHERE c.relnamespace = $2::regnamespace AND c.relkind IN ('r', 'v', 'm', 'S', 'p')",
        role,
        SCHEMA,
    )
    assert {r["relname"] for r in relations} >= {*TABLES, "sql_arrivals", "sql_limits", "schema_version"}
    assert [r["relname"] for r in relations if r["allowed"]] == []


async def test_the_role_cannot_call_the_helper_functions(roles: Roles, app_conn: asyncpg.Connection) -> None:
    role = await roles.create(*DOC_GRANTS)
    enqueuer = await roles.connect(role)
    for call in (
        "SELECT workly.workly_new_id('task')",
        "SELECT workly.workly_check_url('url', 'http://a.example')",
    ):
        with pytest.raises(
            asyncpg.InsufficientPrivilegeError, match="permission denied for function workly_"
        ):
            await enqueuer.fetchval(call)

    executable = await app_conn.fetch(
        "SELECT proname, provolatile, prosecdef FROM pg_proc "
        "WHERE pronamespace = $2::regnamespace AND has_function_privilege($1, oid, 'EXECUTE')",
        role,
        SCHEMA,
    )
    names = {f["proname"] for f in executable}
    assert {"enqueue_task", "publish_event"} <= names
    assert not any(name.startswith("workly_") for name in names), names
    # What else it may run (the claim_* arithmetic of migration 0006, which PUBLIC may run)
    # is immutable and runs as the caller: it can neither read nor write a table.
    others = [f for f in executable if f["proname"] not in ("enqueue_task", "publish_event")]
    assert all(f["provolatile"] == b"i" and not f["prosecdef"] for f in others), others


async def test_usage_without_execute_is_not_enough(roles: Roles, app_conn: asyncpg.Connection) -> None:
    # PUBLIC has no EXECUTE: an explicit ACL (NULL would mean PostgreSQL's default, PUBLIC
    # EXECUTE) with no entry for PUBLIC (grantee 0).
    for name in ("enqueue_task", "publish_event"):
        acl = await app_conn.fetchval(
            "SELECT proacl::text[] FROM pg_proc WHERE proname = $1 AND pronamespace = $2::regnamespace",
            name,
            SCHEMA,
        )
        assert acl is not None, name
        assert not [entry for entry in acl if entry.startswith("=")], acl

    conn = await roles.connect(await roles.create("GRANT USAGE ON SCHEMA workly TO {role}"))
    with pytest.raises(
        asyncpg.InsufficientPrivilegeError, match="permission denied for function enqueue_task"
    ):
        await enqueue(conn)
    with pytest.raises(
        asyncpg.InsufficientPrivilegeError, match="permission denied for function publish_event"
    ):
        await conn.fetchval(PUBLISH, "invoice.paid", "{}")
    assert await app_conn.fetchval("SELECT count(*) FROM workly.tasks") == 0


@pytest.mark.parametrize(
    "grants",
    [
        pytest.param((), id="no grants"),
        pytest.param((DOC_GRANTS[1],), id="execute without usage"),
    ],
)
async def test_without_usage_the_function_cannot_be_resolved(
    roles: Roles, app_conn: asyncpg.Connection, grants: tuple[str, ...]
) -> None:
    conn = await roles.connect(await roles.create(*grants))
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for schema workly"):
        await enqueue(conn)
    assert await app_conn.fetchval("SELECT count(*) FROM workly.tasks") == 0


def shadows(schema: str) -> list[str]:
    """Look-alikes of what the functions use, in ``schema``: each would change or break an
    enqueue if the functions resolved names through their caller's search_path."""
    return [
        # An open breaker on the task's origin: a task would be held (run_at 9999).
        f"CREATE TABLE {schema}.breakers (key text, position text)",
        f"INSERT INTO {schema}.breakers VALUES ('{ORIGIN}', 'open')",
        # A 1-byte body limit: every body would be refused.
        f"CREATE TABLE {schema}.sql_limits (max_body_bytes integer)",
        f"INSERT INTO {schema}.sql_limits VALUES (1)",
        f"CREATE TABLE {schema}.tasks (id text, queue text)",
        f"CREATE TABLE {schema}.queues (name text)",
        f"CREATE TABLE {schema}.events (id text)",
        f"CREATE TABLE {schema}.sql_arrivals (at timestamptz)",
    ]


EVIL_ROUTINES = [
    "CREATE FUNCTION evil.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'evil' $$",
    "CREATE FUNCTION evil.workly_new_id(text) RETURNS text LANGUAGE sql AS $$ SELECT 'task_EVIL' $$",
    "CREATE FUNCTION evil.gen_random_uuid() RETURNS uuid "
    "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil.gen_random_uuid called'; END $$",
    # `!~` answering "matches" always: an invalid queue name would pass the check.
    "CREATE FUNCTION evil.never(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$",
    "CREATE OPERATOR evil.!~ (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.never)",
]


@pytest.mark.parametrize("caller", ["granted role", "application"])
async def test_the_caller_search_path_changes_nothing(
    roles: Roles, app_conn: asyncpg.Connection, caller: str
) -> None:
    if caller == "granted role":
        role = await roles.create(*DOC_GRANTS)
        await app_conn.execute(f'CREATE SCHEMA evil AUTHORIZATION "{role}"')
        conn = await roles.connect(role)
    else:  # the application's own connection (a superuser here), with its own look-alikes
        await app_conn.execute("CREATE SCHEMA evil")
        conn = app_conn
    for statement in [*shadows("evil"), *EVIL_ROUTINES, *shadows("pg_temp")]:
        await conn.execute(statement)
    # pg_catalog after evil, so that the look-alikes of built-ins win too; pg_temp, searched
    # first for tables when not named, holds look-alike tables as well.
    await conn.execute("SET search_path = evil, pg_catalog, public")
    # The look-alikes are live in the caller's session ...
    assert await conn.fetchval("SELECT lower('ABC')") == "evil"
    assert await conn.fetchval("SELECT 'not a queue' !~ '^[a-z]+$'") is False
    assert await conn.fetchval("SELECT max_body_bytes FROM sql_limits") == 1

    # ... and the functions see none of them.
    task_id = await enqueue(conn, body='{"order": 7}')
    event_id = await conn.fetchval(PUBLISH, "invoice.paid", '{"total": 42}')
    assert TASK_ID.fullmatch(task_id), task_id
    task = await app_conn.fetchrow(
        "SELECT queue, breaker, body, run_at < '9000-01-01' AS due, held_run_at "
        "FROM workly.tasks WHERE id = $1",
        task_id,
    )
    assert task is not None
    assert dict(task) == {
        "queue": "orders",
        "breaker": ORIGIN,
        "body": b'{"order": 7}',
        "due": True,
        "held_run_at": None,
    }
    assert await app_conn.fetchval("SELECT name FROM workly.queues") == "orders"
    assert await app_conn.fetchval("SELECT id FROM workly.events") == event_id
    assert await app_conn.fetchval("SELECT count(*) FROM workly.sql_arrivals") >= 1
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"^queue: must be 1-128"):
        await enqueue(conn, queue="not a queue")
    for schema in ("evil", "pg_temp"):
        counts = [
            await conn.fetchval(f"SELECT count(*) FROM {schema}.{t}") for t in ("tasks", "queues", "events")
        ]
        assert counts == [0, 0, 0], schema


async def test_the_functions_run_as_their_owner_with_a_fixed_search_path(
    app_conn: asyncpg.Connection,
) -> None:
    rows = await app_conn.fetch(
        "SELECT proname, prosecdef, proconfig, pg_get_userbyid(proowner) AS owner FROM pg_proc "
        "WHERE pronamespace = $1::regnamespace "
        "AND (prosecdef OR proname IN ('enqueue_task', 'publish_event')) ORDER BY proname",
        SCHEMA,
    )
    migrated_by = await app_conn.fetchval("SELECT current_user")
    # Only pg_catalog, then pg_temp (last, where no caller's temporary object can come
    # first); Workly's own objects are named with their schema. The regular expressions
    # are read with standard_conforming_strings on, whatever the caller set.
    pinned = ["search_path=pg_catalog, pg_temp", "standard_conforming_strings=on"]
    assert [tuple(r) for r in rows] == [
        ("enqueue_task", True, pinned, migrated_by),
        ("publish_event", True, pinned, migrated_by),
    ]  # and no other SECURITY DEFINER function in the schema


async def test_a_role_that_may_create_objects_in_workly_s_schema_cannot_hijack_the_functions(
    roles: Roles, app_conn: asyncpg.Connection
) -> None:
    """An operator or function planted in Workly's own schema (by a role with CREATE on it, as
    PUBLIC has on public before PostgreSQL 15) is never picked by the functions: they search
    pg_catalog only and name Workly's objects with their schema. (numeric * integer has no
    exact built-in operator, so one in a searched schema would win over pg_catalog's.)"""
    role = await roles.create(*DOC_GRANTS, f"GRANT CREATE ON SCHEMA {SCHEMA} TO {{role}}")
    conn = await roles.connect(role)
    await conn.execute(f"CREATE TABLE {SCHEMA}.loot (who text, seen bigint)")
    await conn.execute(
        f"""CREATE FUNCTION {SCHEMA}.steal(numeric, integer) RETURNS numeric LANGUAGE sql AS $$
                INSERT INTO {SCHEMA}.loot SELECT current_user, count(*) FROM {SCHEMA}.tasks;
                SELECT $1 OPERATOR(pg_catalog.*) $2 $$"""
    )
    await conn.execute(
        f"CREATE OPERATOR {SCHEMA}.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = {SCHEMA}.steal)"
    )
    await conn.execute(
        f"CREATE FUNCTION {SCHEMA}.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'evil' $$"
    )
    task_id = await enqueue(conn)
    assert TASK_ID.fullmatch(task_id)
    assert await conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.loot") == 0
    assert await app_conn.fetchval(f"SELECT breaker FROM {SCHEMA}.tasks WHERE id = $1", task_id) == ORIGIN


async def test_a_caller_without_standard_conforming_strings_gets_the_same_rules(
    roles: Roles, app_db: str
) -> None:
    """The functions' regular expressions are written with standard_conforming_strings on; a
    session with it off (compiling them first) gets the same verdicts."""
    conn = await asyncpg.connect(app_db)
    try:
        await conn.execute("SET standard_conforming_strings = off")
        assert TASK_ID.fullmatch(await enqueue(conn))
        for bad_type in ("invoice paid", "a/b?c"):
            with pytest.raises(asyncpg.InvalidParameterValueError, match=r"^type: "):
                await conn.fetchval(PUBLISH, bad_type, '{"n": 1}')
    finally:
        await conn.close()


async def test_an_overload_planted_beside_a_helper_is_never_chosen(
    roles: Roles, app_conn: asyncpg.Connection
) -> None:
    """Every helper is called with its parameters' exact types: an overload taking integers
    for a range check's bounds (which a call with integer literals would prefer) is not run."""
    role = await roles.create(*DOC_GRANTS, f"GRANT CREATE ON SCHEMA {SCHEMA} TO {{role}}")
    conn = await roles.connect(role)
    await conn.execute(f"CREATE TABLE {SCHEMA}.loot (who text)")
    for parameters in ("text, double precision, integer, integer, boolean",
                       "text, double precision, integer, numeric, boolean",
                       "varchar, double precision, double precision, double precision, boolean"):  # fmt: skip
        await conn.execute(
            f"""CREATE FUNCTION {SCHEMA}.workly_check_range({parameters}) RETURNS void LANGUAGE sql AS $$
                    INSERT INTO {SCHEMA}.loot SELECT current_user $$"""
        )
    task_id = await conn.fetchval(
        f"SELECT {SCHEMA}.enqueue_task(queue => 'q', url => $1, timeout => 5, deadline => 60,"
        " min_backoff => 1, max_backoff => 2)",
        HOOK,
    )
    assert TASK_ID.fullmatch(task_id)
    with pytest.raises(asyncpg.InvalidParameterValueError, match=r"^timeout: "):
        await conn.fetchval(f"SELECT {SCHEMA}.enqueue_task(queue => 'q', url => $1, timeout => 0)", HOOK)
    assert await app_conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.loot") == 0
