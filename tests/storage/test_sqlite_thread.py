"""The SQLite connection thread: a failed transaction, even a failed COMMIT, leaves the
connection ready for the next one; jobs run one at a time in the order given, a job whose
caller gave up before it started is not run, and close() ends the thread."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from pathlib import Path

import pytest

from workly.errors import StorageUnavailable
from workly.storage.sqlite.thread import SqliteThread


def _fail_at_commit(db: sqlite3.Connection) -> None:
    db.execute("INSERT INTO child (parent) VALUES (42)")  # the deferred foreign key fails at COMMIT


def _insert_parent(db: sqlite3.Connection) -> int:
    db.execute("INSERT INTO parent (id) VALUES (42)")
    return int(db.execute("SELECT count(*) FROM parent").fetchone()[0])


async def test_a_failed_commit_is_rolled_back_and_the_next_write_works(tmp_path: Path) -> None:
    thread = SqliteThread("test")
    await thread.open(tmp_path / "t.db", ["PRAGMA foreign_keys = ON"])
    try:
        await thread.run(
            lambda db: db.executescript(
                "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
                "CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);"
            )
        )
        with pytest.raises(sqlite3.IntegrityError):
            await thread.transaction("FULL", _fail_at_commit)
        assert await thread.transaction("FULL", _insert_parent) == 1
    finally:
        await thread.close()


async def test_jobs_run_in_order_and_close_ends_the_thread(tmp_path: Path) -> None:
    thread = SqliteThread("test")
    await thread.open(tmp_path / "t.db", [])
    worker = thread._thread
    assert worker is not None and worker.is_alive()
    try:
        done: list[int] = []

        def job(db: sqlite3.Connection, n: int) -> int:
            db.execute("SELECT 1").fetchall()
            done.append(n)
            return n * 10

        results = await asyncio.gather(*(thread.run(job, n) for n in range(20)))
        assert results == [n * 10 for n in range(20)] and done == list(range(20))
    finally:
        await thread.close()
    assert not worker.is_alive()
    await thread.close()  # a second close: nothing left to do
    with pytest.raises(StorageUnavailable):
        await thread.transaction("FULL", _insert_parent)
    with pytest.raises(StorageUnavailable):
        await thread.run(lambda db: None)
    assert thread._thread is None  # refused without starting a thread again


async def test_a_job_whose_caller_gave_up_before_it_started_is_not_run(tmp_path: Path) -> None:
    thread = SqliteThread("test")
    await thread.open(tmp_path / "t.db", [])
    release = threading.Event()
    ran: list[str] = []
    try:
        first = asyncio.ensure_future(thread.run(lambda db: release.wait(10) and ran.append("first")))
        second = asyncio.ensure_future(thread.run(lambda db: ran.append("second")))
        await asyncio.sleep(0)  # both queued: the thread takes the first and waits in it
        assert thread._jobs.qsize() >= 1
        second.cancel()
        release.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await second
        assert await thread.run(lambda db: ran.append("third")) is None
        assert ran == ["first", "third"]
    finally:
        release.set()
        await thread.close()


def _raise(exc: BaseException) -> None:
    raise exc


@pytest.mark.parametrize(
    ("raised", "seen"),
    [
        (sqlite3.OperationalError("no such table: missing"), sqlite3.OperationalError),
        (KeyboardInterrupt(), KeyboardInterrupt),
        (StopIteration(), RuntimeError),  # an asyncio future cannot carry StopIteration
    ],
)
async def test_an_error_in_a_job_reaches_its_caller_and_the_thread_goes_on(
    tmp_path: Path, raised: BaseException, seen: type[BaseException]
) -> None:
    thread = SqliteThread("test")
    await thread.open(tmp_path / "t.db", [])
    try:
        with pytest.raises(seen):
            await thread.run(lambda db: _raise(raised))
        assert await thread.run(lambda db: db.execute("SELECT 7").fetchone()[0]) == 7
    finally:
        await thread.close()


def test_a_thread_dropped_without_close_ends(tmp_path: Path) -> None:
    async def open_and_drop() -> threading.Thread:
        thread = SqliteThread("dropped")
        await thread.open(tmp_path / "t.db", [])
        worker = thread._thread
        assert worker is not None
        return worker

    worker = asyncio.run(open_and_drop())
    gc.collect()
    worker.join(timeout=10)
    assert not worker.is_alive()
