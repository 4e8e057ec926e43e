"""Shared fixtures: a PostgreSQL server, fresh databases, and storages of both kinds."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from hypothesis import HealthCheck, settings

from tests.support.clock import VirtualClock
from tests.support.postgres import create_database, drop_database, postgres_server
from workly.storage.contract import Storage
from workly.storage.postgres import PostgresStorage
from workly.storage.sqlite import SqliteStorage

IN_CI = os.environ.get("CI", "").lower() == "true"

# CI shares two cores between parallel test processes, the servers they start and the
# database: an example's time says nothing there. Failures print the blob that replays them.
settings.register_profile(
    "ci",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
if IN_CI:
    settings.load_profile("ci")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: twice as many processes as cores. Most tests wait on sockets, on servers
    they started and on PostgreSQL more than they compute: measured on 2 cores on 2026-12-07,
    3 processes left the cores idle a third of the time (the whole suite in 7:14), 4 kept them
    busy (6:06)."""
    return max(2, (os.cpu_count() or 1) * 2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``long`` first (a stable sort: modules stay together). xdist hands each
    process a contiguous share and steals from the ends of shares: a minute-long test started
    near the end of the run kept one process busy while the others sat idle (the suite's last
    minute was the SQLite soak alone)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(scope="session", autouse=True)
def interruptible_children() -> None:
    """A script that starts pytest with ``&`` leaves SIGINT ignored, every child inherits
    that, and Python then keeps it ignored: the tests that press Ctrl-C on the real CLI
    would wait on a process that cannot hear it. Handled, it is reset in each child."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """URL of a PostgreSQL maintenance database. Skips locally without one; fails in CI."""
    with postgres_server() as url:
        if url is None:
            if IN_CI:
                pytest.fail("CI=true but no PostgreSQL server: set WORKLY_TEST_DATABASE_URL or install one")
            pytest.skip("no PostgreSQL server (set WORKLY_TEST_DATABASE_URL)")
        yield url


@pytest.fixture(scope="session")
def pg_session_db(pg_server: str) -> Iterator[str]:
    """One migrated database for the whole session; tests empty it before use."""
    url = asyncio.run(create_database(pg_server))

    async def migrate() -> None:
        storage = await PostgresStorage.open(url)
        try:
            await storage.database.migrate()
        finally:
            await storage.close()

    try:
        asyncio.run(migrate())
        yield url
    finally:
        asyncio.run(drop_database(pg_server, url))


@pytest.fixture
async def pg_fresh_db(pg_server: str) -> AsyncIterator[str]:
    """A new, empty (unmigrated) database for this test alone."""
    url = await create_database(pg_server)
    yield url
    await drop_database(pg_server, url)


# What a test may leave behind: every table but the migrations' and sql_limits (set by
# migrate). A TRUNCATE makes new files for a table and each of its indexes (26 ms for all
# of them on a quiet machine, ~200 ms under load), a DELETE of a test's few rows takes 2 ms:
# tables are emptied by DELETE, with triggers and foreign keys off for the statement
# (session_replication_role: the counts' triggers would only write what is deleted next),
# and truncated only when a test left a thousand rows or more, so that the dead versions
# of load tests do not slow the tests after them (autovacuum may be off). Every sequence of
# theirs starts again at 1, as after TRUNCATE … RESTART IDENTITY.
_TEST_TABLES = (
    "queues", "tasks", "attempts", "queue_releases", "queue_turns", "endpoints", "events", "breakers",
    "operations", "schedules", "sql_arrivals", "task_counts", "delivery_minutes", "tenants", "api_keys",
    "audit_log", "event_types", "settings",
)  # fmt: skip
_BIG = 1000
_EMPTY_TABLES = f"""
DO $$
DECLARE
    tables text[] := ARRAY[{", ".join(f"'{t}'" for t in _TEST_TABLES)}];
    name text;
    kept bigint;
    big text[] := '{{}}';
BEGIN
    SET LOCAL session_replication_role = replica;
    FOREACH name IN ARRAY tables LOOP
        EXECUTE format('SELECT count(*) FROM (SELECT FROM %I LIMIT {_BIG}) AS s', name) INTO kept;
        IF kept >= {_BIG} THEN
            big := big || name;
        ELSIF kept > 0 THEN
            EXECUTE format('DELETE FROM %I', name);
        END IF;
    END LOOP;
    IF cardinality(big) > 0 THEN
        EXECUTE 'TRUNCATE ' || (SELECT string_agg(quote_ident(b), ', ') FROM unnest(big) AS b) || ' CASCADE';
    END IF;
    PERFORM setval(dep.objid::regclass, 1, false)
    FROM pg_depend dep JOIN pg_class seq ON seq.oid = dep.objid AND seq.relkind = 'S'
    WHERE dep.refobjid IN (SELECT t::regclass FROM unnest(tables) AS t) AND dep.deptype IN ('a', 'i');
END $$
"""


async def _empty_postgres(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(_EMPTY_TABLES)
    except asyncpg.InsufficientPrivilegeError:  # a server where the tests' role is no superuser
        await conn.execute(f"TRUNCATE {', '.join(_TEST_TABLES)} RESTART IDENTITY CASCADE")
    finally:
        await conn.close()


@pytest.fixture
async def pg_url(pg_session_db: str) -> str:
    """The session database, emptied for this test."""
    await _empty_postgres(pg_session_db)
    return pg_session_db


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'workly.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest) -> str:
    """A migrated-on-open database URL of the parametrised backend."""
    fixture = "pg_url" if backend == "postgres" else "sqlite_url"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
async def storage(database_url: str) -> AsyncIterator[Storage]:
    opened: Storage
    if database_url.startswith("sqlite"):
        opened = await SqliteStorage.open(database_url)
    else:
        opened = await PostgresStorage.open(database_url)
    await opened.database.migrate()
    yield opened
    await opened.close()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()
