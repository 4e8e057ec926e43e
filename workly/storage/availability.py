"""Which exceptions mean "the database is unavailable" (down, restarting, unreachable),
as opposed to "this operation or its data is wrong"."""

from __future__ import annotations

import sqlite3

import asyncpg

from workly.errors import StorageError

UNAVAILABLE: tuple[type[Exception], ...] = (
    StorageError,
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.OperatorInterventionError,  # shutting down, starting up, crashed
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, disk full, out of memory
    sqlite3.OperationalError,  # locked, busy, disk I/O
)


def is_unavailable(exc: BaseException) -> bool:
    return isinstance(exc, UNAVAILABLE)
