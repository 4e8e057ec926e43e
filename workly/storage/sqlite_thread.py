"""A sqlite3 connection confined to one thread, driven from asyncio.

Work is shipped as whole functions (a transaction, a read), so a transaction costs one
hand-off between the event loop and the thread, not one per statement: with
aiosqlite, whose every execute is a hand-off, a single-task enqueue took six and the
writer saturated far below SQLite's commit rate (see docs/performance.md).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from workly.errors import StorageUnavailable

T = TypeVar("T")
SynchronousMode = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class SqliteThread:
    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"workly-sqlite-{name}")
        self._conn: sqlite3.Connection | None = None
        self._synchronous: str | None = None  # the connection's current PRAGMA synchronous

    async def open(self, path: Path, pragmas: list[str]) -> None:
        self._conn = await self._submit(partial(_connect, path, pragmas))

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` on the connection's thread."""
        return await self._submit(partial(fn, self._connection(), *args))

    async def transaction(self, synchronous: str, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` inside BEGIN IMMEDIATE … COMMIT (ROLLBACK on error).

        ``synchronous`` is the PRAGMA synchronous this commit runs under (WAL mode): FULL
        syncs the WAL at COMMIT, and with it every earlier commit's frames; NORMAL leaves
        the sync to the next checkpoint or FULL commit.
        """
        return await self._submit(partial(self._transaction, synchronous, fn, *args))

    def _transaction(self, synchronous: str, fn: Callable[..., T], *args: Any) -> T:
        conn = self._connection()
        if synchronous != self._synchronous:
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._synchronous = synchronous
        return _in_transaction(fn, conn, *args)

    async def close(self) -> None:
        if self._conn is not None:
            await self._submit(self._conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageUnavailable("the SQLite connection is closed")
        return self._conn

    async def _submit(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)


def _connect(path: Path, pragmas: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in pragmas:
        conn.execute(pragma)
    return conn


def _in_transaction(fn: Callable[..., T], conn: sqlite3.Connection, *args: Any) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")  # inside the try: a failed COMMIT (disk full, I/O error) must not
    except BaseException:  # leave the connection in a transaction that blocks every later write
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
