"""Shared fixtures: a PostgreSQL server, fresh databases, and storages of both kinds."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.support.clock import VirtualClock
from tests.support.postgres import create_database, drop_database, postgres_server
from workly.storage.base import Storage
from workly.storage.postgres import PostgresStorage
from workly.storage.sqlite import SqliteStorage

IN_CI = os.environ.get("CI", "").lower() == "true"


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
            await storage.migrate()
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


async def _empty_postgres(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "TRUNCATE queues, tasks, attempts, queue_releases, queue_turns, endpoints, events, breakers, "
            "operations, schedules, sql_arrivals, task_counts, delivery_minutes RESTART IDENTITY CASCADE"
        )
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
    await opened.migrate()
    yield opened
    await opened.close()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()
