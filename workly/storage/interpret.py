"""Driver errors become Workly's own at the storage boundary (River's ``interpretError``).

Each backend names its interpretation (``interpret_postgres_error``,
``interpret_sqlite_error``) and marks its class with ``@raises_workly_errors(...)``: every
public coroutine method of the class then re-raises a driver error as a ``StorageError``
(``StorageUnavailable`` for a database that is down, restarting, unreachable or too slow,
``StorageFull``, one of them, for a disk that is full, ``StorageContention``, another, for a
transaction PostgreSQL aborted to break a deadlock;
``StorageConflict`` for a constraint). Workly's own errors and programming errors pass
unchanged. So callers branch on one hierarchy (workly/errors.py) whatever the database.
"""

from __future__ import annotations

import errno
import functools
import inspect
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from workly.errors import (
    StorageConflict,
    StorageContention,
    StorageError,
    StorageFull,
    StorageUnavailable,
    WorklyError,
)

T = TypeVar("T")
Interpretation = Callable[[BaseException], StorageError | None]

# Deadlock and serialization failures: the transaction rolled back whole; the same one again
# may well succeed (SQLSTATE 40P01, 40001).
CONTENTION: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.SerializationError,
)
_PG_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,  # asyncpg's command_timeout: WORKLY_DB_TIMEOUT passed
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,  # the connection or the pool is closed or closing
    # The connection's protocol state broke: the server closed it mid-statement (seen as it
    # shut down: "cannot switch to state 12; another operation is in progress").
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up, crashed
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, disk full, out of memory
    asyncpg.exceptions.QueryCanceledError,  # a server-side statement_timeout
)


def interpret_postgres_error(exc: BaseException) -> StorageError | None:
    """The Workly error for an asyncpg (or socket) error; None for anything else."""
    if isinstance(exc, WorklyError):
        return None
    if isinstance(exc, asyncpg.exceptions.DiskFullError) or _no_space(exc):
        return StorageFull(f"a disk PostgreSQL writes to is full: {exc}")
    if isinstance(exc, CONTENTION):
        return StorageContention(f"PostgreSQL aborted a transaction: {type(exc).__name__}: {exc}")
    if isinstance(exc, _PG_UNAVAILABLE):
        return StorageUnavailable(f"PostgreSQL is unavailable: {type(exc).__name__}: {exc}")
    if isinstance(exc, asyncpg.exceptions.IntegrityConstraintViolationError):
        return StorageConflict()
    if isinstance(exc, asyncpg.PostgresError):
        return StorageError(f"PostgreSQL error: {type(exc).__name__}: {exc}")
    return None


def interpret_sqlite_error(exc: BaseException) -> StorageError | None:
    """The Workly error for a sqlite3 (or file) error; None for anything else."""
    if isinstance(exc, WorklyError):
        return None
    # The primary code (the low byte of an extended one). SQLite's temporary files count too.
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL or _no_space(exc):
        return StorageFull(f"a disk SQLite writes to is full: {exc}")
    if isinstance(exc, (sqlite3.OperationalError, OSError)):  # locked, busy, disk I/O
        return StorageUnavailable(f"SQLite is unavailable: {exc}")
    if isinstance(exc, sqlite3.IntegrityError):
        return StorageConflict()
    if isinstance(exc, sqlite3.Error):
        return StorageError(f"SQLite error: {type(exc).__name__}: {exc}")
    return None


def _no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def raises_workly_errors(interpret: Interpretation) -> Callable[[type[T]], type[T]]:
    """Class decorator: each public coroutine method (and classmethod, such as ``open``)
    raises driver errors as Workly's."""

    def decorate(cls: type[T]) -> type[T]:
        for name, member in list(vars(cls).items()):
            if name.startswith("_"):
                continue
            if isinstance(member, classmethod) and inspect.iscoroutinefunction(member.__func__):
                setattr(cls, name, classmethod(_translating(member.__func__, interpret)))
            elif inspect.iscoroutinefunction(member):
                setattr(cls, name, _translating(member, interpret))
        return cls

    return decorate


def _translating(
    method: Callable[..., Awaitable[Any]], interpret: Interpretation
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def translated(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except Exception as exc:
            workly_error = interpret(exc)
            if workly_error is None:
                raise
            raise workly_error from exc

    return translated
