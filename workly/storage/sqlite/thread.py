"""A sqlite3 connection confined to one thread, driven from asyncio.

Work is shipped as whole functions (a transaction, a read), so a transaction costs one
hand-off between the event loop and the thread, not one per statement: with
aiosqlite, whose every execute is a hand-off, a single-task enqueue took six and the
writer saturated far below SQLite's commit rate (see docs/performance.md).

The hand-off is a queue the thread takes work from and a callback into the event loop
with the answer, not ``run_in_executor``: a ThreadPoolExecutor's submit and its futures
ran some sixty Python calls per transaction (locks, conditions, a semaphore, an
``iscoroutinefunction`` check of the partial), a tenth of a delivered task's calls at
200 tasks/s (``python -m tools.bench.call_counts``).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from workly.errors import StorageUnavailable

T = TypeVar("T")
SynchronousMode = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class SqliteThread:
    """The thread is a daemon: a process that exits without close() (a crash, a forced exit)
    abandons the jobs still queued, where an executor's exit hook would have run them. Nothing
    acknowledged is lost that way: a caller is answered only after its COMMIT returned, and a
    transaction cut short has no commit record in the WAL. What is lost is bookkeeping not yet
    written (attempt results, leases): those tasks are delivered again, as after a crash."""

    def __init__(self, name: str) -> None:
        self._name = f"workly-sqlite-{name}"
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None  # started by the first job
        self._conn: sqlite3.Connection | None = None
        self._synchronous: str | None = None  # the connection's current PRAGMA synchronous
        # Dropped without close() (a failed open, say): the thread still ends. It holds only
        # the queue, never this object.
        weakref.finalize(self, self._jobs.put, None)

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
        self._connection()  # closed: refused here, without starting a thread again
        return await self._submit(partial(self._transaction, synchronous, fn, *args))

    def _transaction(self, synchronous: str, fn: Callable[..., T], *args: Any) -> T:
        conn = self._connection()
        if synchronous != self._synchronous:
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._synchronous = synchronous
        return _in_transaction(fn, conn, *args)

    async def close(self) -> None:
        thread = self._thread
        try:
            if self._conn is not None:
                conn, self._conn = self._conn, None  # refused from here on
                await self._submit(conn.close)  # the last job
        finally:
            if thread is not None:
                self._thread = None
                self._jobs.put(None)  # after every job already queued
                thread.join()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageUnavailable("the SQLite connection is closed")
        return self._conn

    async def _submit(self, call: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()
        if self._thread is None:
            # A daemon, so that a loop that ends without close() cannot hold the interpreter's
            # exit on this thread's wait for work (see the class's docstring).
            self._thread = threading.Thread(target=_work, args=(self._jobs,), name=self._name, daemon=True)
            self._thread.start()
        self._jobs.put((call, loop, answer))
        return await answer


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The thread: run each job, hand its outcome to the job's event loop."""
    while (job := jobs.get()) is not None:
        _run(*job)
        del job  # holds no result (the connection, after open) while it waits for the next


def _run(call: Callable[[], Any], loop: asyncio.AbstractEventLoop, answer: asyncio.Future[Any]) -> None:
    if answer.cancelled():  # its caller gave up before it started, as an executor skips it
        return
    try:
        outcome = partial(_settle, answer, call())
    except BaseException as exc:  # every outcome goes back to the caller
        outcome = partial(_fail, answer, exc)
    # A closed loop (RuntimeError): nobody waits for the answer. Nothing else may end the
    # thread, or every later caller would wait forever.
    with contextlib.suppress(Exception):
        loop.call_soon_threadsafe(outcome)


def _settle(answer: asyncio.Future[Any], result: Any) -> None:
    if not answer.cancelled():
        answer.set_result(result)


def _fail(answer: asyncio.Future[Any], exc: BaseException) -> None:
    if not answer.cancelled():
        if isinstance(exc, StopIteration):  # a future refuses it (it would end the awaiting frame)
            exc = RuntimeError(f"StopIteration in a SQLite job: {exc!r}")
        answer.set_exception(exc)


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
