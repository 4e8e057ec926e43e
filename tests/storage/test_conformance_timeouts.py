"""The storage contract, the database timeout: a statement stuck behind another
transaction gives up after ``db_timeout`` with an "unavailable" error, stores nothing,
and the storage works again once the blocker is gone. Both backends.

The blocker is a second, plain connection holding the write lock (SQLite) or an
exclusive lock on ``tasks`` (PostgreSQL), as a long migration or a stuck admin session would.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

from tests.storage.helpers import new
from tests.support.clock import VirtualClock
from workly.database_url import sqlite_path
from workly.errors import StorageConflict, StorageError, StorageFull, StorageUnavailable
from workly.storage.factory import open_storage
from workly.storage.interpret import interpret_postgres_error, interpret_sqlite_error

DB_TIMEOUT = 0.2
GUARD = 8.0  # far below the 10 s default: failing inside it shows db_timeout was applied


@asynccontextmanager
async def blocking_writes(database_url: str) -> AsyncIterator[None]:
    if database_url.startswith("sqlite"):
        conn = sqlite3.connect(sqlite_path(database_url), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    pg = await asyncpg.connect(database_url)
    transaction = pg.transaction()
    await transaction.start()
    await pg.execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
    try:
        yield
    finally:
        await transaction.rollback()
        await pg.close()


async def test_a_blocked_write_gives_up_after_the_database_timeout(
    database_url: str, clock: VirtualClock
) -> None:
    storage = await open_storage(database_url, db_timeout=DB_TIMEOUT)
    try:
        await storage.database.migrate()
        blocked, later = new(), new()
        async with blocking_writes(database_url):
            async with asyncio.timeout(GUARD):
                with pytest.raises(StorageUnavailable):
                    await storage.tasks.enqueue([blocked], clock.now())
        [stored] = await storage.tasks.enqueue([later], clock.now())
        assert stored.created
        assert await storage.tasks.get_task(blocked.id) is None
        listed, _ = await storage.tasks.list_tasks("q", None, 10, None)
        assert [t.id for t in listed] == [later.id]
    finally:
        await storage.close()


def test_running_out_of_database_resources_counts_as_unavailable() -> None:
    # PostgreSQL's class 53 (too many connections, disk full, out of memory) passes: the
    # API answers 503 (retry later), not 500.
    for exc in (
        asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
        asyncpg.exceptions.DiskFullError("could not extend file"),
        asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError(),
        # A connection the server dropped in the middle of a statement, as it shuts down
        # (the soak saw one reach the API as a 500, tools/soak).
        asyncpg.exceptions.InternalClientError(
            "cannot switch to state 12; another operation (2) is in progress"
        ),
    ):
        assert isinstance(interpret_postgres_error(exc), StorageUnavailable), exc
    assert isinstance(
        interpret_sqlite_error(sqlite3.OperationalError("database is locked")), StorageUnavailable
    )


def test_a_full_disk_is_said_as_such_and_counts_as_unavailable() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # as sqlite3 sets it
    no_space = OSError(errno.ENOSPC, "No space left on device")
    for error in (
        interpret_sqlite_error(full),
        interpret_sqlite_error(no_space),
        interpret_postgres_error(asyncpg.exceptions.DiskFullError("could not extend file")),
        interpret_postgres_error(no_space),
    ):
        assert isinstance(error, StorageFull) and isinstance(error, StorageUnavailable), error
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = sqlite3.SQLITE_BUSY
    assert type(interpret_sqlite_error(locked)) is StorageUnavailable
    assert type(interpret_sqlite_error(OSError(errno.EIO, "I/O error"))) is StorageUnavailable


def test_other_driver_errors_become_conflicts_or_storage_errors_and_ours_pass() -> None:
    unique = interpret_postgres_error(asyncpg.exceptions.UniqueViolationError("duplicate key"))
    assert isinstance(unique, StorageConflict)
    assert "duplicate key" not in str(unique)  # what a client reads names no table or constraint
    assert isinstance(
        interpret_sqlite_error(sqlite3.IntegrityError("UNIQUE constraint failed")), StorageConflict
    )
    data = interpret_postgres_error(asyncpg.exceptions.DataError("invalid byte sequence"))
    assert type(data) is StorageError
    assert type(interpret_sqlite_error(sqlite3.DataError("too big"))) is StorageError
    for ours in (StorageUnavailable("down"), ValueError("a bug"), AssertionError()):
        assert interpret_postgres_error(ours) is None and interpret_sqlite_error(ours) is None
