"""Finding a PostgreSQL server for the tests.

Order: WORKLY_TEST_DATABASE_URL; else this machine's server on 127.0.0.1:5432 (user
postgres); else a throwaway cluster started with initdb/pg_ctl when they are on PATH.
In CI (CI=true) not finding one is an error, never a skip.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


class Cluster:
    """A PostgreSQL cluster of the test's own, in a temporary directory, that it can stop
    and start again (the same data, the same port) to play a database restart."""

    def __init__(self) -> None:
        initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
        if not initdb or not pg_ctl:
            raise LookupError("no PostgreSQL server binaries on PATH")
        self._pg_ctl = pg_ctl
        self.data = Path(tempfile.mkdtemp(prefix="workly-pg-"))
        self._run_as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            shutil.chown(self.data, "postgres")
            self._run_as = ["runuser", "-u", "postgres", "--"]
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        subprocess.run(
            [*self._run_as, initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust"],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        opts = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} -c fsync=off"
        log = str(self.data / "log")
        subprocess.run(
            [*self._run_as, self._pg_ctl, "-D", str(self.data), "-o", opts, "-w", "-l", log, "start"],
            check=True,
            capture_output=True,
        )

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            [*self._run_as, self._pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop"], capture_output=True
        )

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.data, ignore_errors=True)


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
