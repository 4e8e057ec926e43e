"""How the parts of the PostgreSQL backend run their named queries: by name, with
parameters by name (storage/queries.py), on the pool they share (``Connections``)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from workly.json_text import from_json
from workly.storage import rows
from workly.storage.interpret import CONTENTION
from workly.storage.queries import PostgresQueries, Query

Connection = asyncpg.Connection | asyncpg.Pool | PoolConnectionProxy
T = TypeVar("T")
log = logging.getLogger("workly.storage")
CONTENTION_TRIES = 4


@dataclass(frozen=True, slots=True)
class Connections:
    """What every part of the backend runs on: the pool, the named queries, and what a part
    that needs a connection of its own outside the pool (the LISTEN connection, an index
    rebuild) opens it with."""

    pool: asyncpg.Pool
    q: PostgresQueries
    dsn: str = field(repr=False)  # it may hold the password
    schema: str


async def retrying_contention(transaction: Callable[[], Awaitable[T]], tries: int = CONTENTION_TRIES) -> T:
    """Run ``transaction`` (a coroutine function that opens and ends one transaction, or runs
    one statement outside any) again when PostgreSQL aborted it to break a deadlock or a
    serialization conflict: it rolled back whole, so running it again is running it once.
    The waits are short and random, so that the two sides of a deadlock do not meet again.
    The last failure goes to the caller (as StorageContention, at the storage boundary)."""
    for attempt in range(tries - 1):
        try:
            return await transaction()
        except CONTENTION as exc:
            log.info("transaction aborted (%s); running it again", type(exc).__name__)
            await asyncio.sleep(random.uniform(0.001, 0.01 * 2**attempt))
    return await transaction()


def _as_datetime(value: Any) -> datetime:
    assert isinstance(value, datetime)
    return value


def _as_headers(value: Any) -> dict[str, str]:
    return dict(from_json(value) if isinstance(value, str) else value)


async def use_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Put the schema Workly's tables are in alone on the connection's search_path (pg_temp
    last, where nothing can be put in its way; pg_catalog is searched first anyway), so
    that no statement names it. A SET rather than a startup parameter, which PgBouncer
    would refuse (``schema`` is a checked name: see database_url)."""
    await conn.execute(f'SET search_path = "{schema}", pg_temp')


DECODERS = rows.Decoders(time=_as_datetime, headers=_as_headers)


# The statements, run by name with their parameters by name.
# (``max_seconds`` overrides the statement timeout; no query has a parameter of that name.)
async def fetch(db: Connection, query: Query, max_seconds: float | None = None, **params: Any) -> list[Any]:
    return await db.fetch(query.sql, *query.args(params), timeout=max_seconds)


async def fetchrow(db: Connection, query: Query, **params: Any) -> Any:
    return await db.fetchrow(query.sql, *query.args(params))


async def fetchval(db: Connection, query: Query, **params: Any) -> Any:
    return await db.fetchval(query.sql, *query.args(params))


async def execute(db: Connection, query: Query, max_seconds: float | None = None, **params: Any) -> None:
    await db.execute(query.sql, *query.args(params), timeout=max_seconds)
