"""Finding a PostgreSQL server for the tests.

Order: WORKLY_TEST_DATABASE_URL; else this machine's server on 127.0.0.1:5432 (user
postgres); else a throwaway cluster started with initdb/pg_ctl when they are on PATH.
In CI (CI=true) not finding one is an error, never a skip.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tools.soak.cluster import Cluster

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _reachable(url: str) -> bool:
    async def probe() -> None:
        conn = await asyncpg.connect(url, timeout=3)
        await conn.close()

    try:
        asyncio.run(probe())
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    return True


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    cluster = Cluster()
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.remove()


@contextmanager
def postgres_server() -> Iterator[str | None]:
    """The URL of a server's maintenance database, or None when there is none."""
    configured = os.environ.get("WORKLY_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    if _reachable(LOCAL_URL):
        yield LOCAL_URL
        return
    try:
        with throwaway_cluster() as url:
            yield url
    except (LookupError, subprocess.CalledProcessError):
        yield None


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


async def create_database(server_url: str, prefix: str = "workly_test") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return with_database(server_url, name)


async def drop_database(server_url: str, database_url: str) -> None:
    name = urlsplit(database_url).path.lstrip("/")
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
