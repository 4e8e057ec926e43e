"""Which PostgreSQL writes wait for their WAL flush.

The dispatcher's bookkeeping (claims, attempt results) commits asynchronously, as SQLite's
commits with synchronous=NORMAL (docs/reliability.md): losing one to an OS crash only means a
task is delivered again. Everything acknowledged to a caller (an enqueue) waits for the
flush, so the setting must stay local to the bookkeeping's own transaction: a pooled
connection that kept it would lose acknowledged tasks.
"""

from __future__ import annotations

import asyncpg
import pytest

from tests.storage.helpers import new, result_for, token
from tests.support.clock import VirtualClock
from workly.storage.postgres import PostgresStorage
from workly.storage.queries import postgres_queries

pytestmark = pytest.mark.postgres
MARGIN = 30.0


async def commit_mode(conn: asyncpg.Connection) -> str:
    mode: str = await conn.fetchval("SHOW synchronous_commit")
    return mode


async def test_a_claim_commits_without_waiting_for_the_flush_and_leaves_the_session_as_it_was(
    pg_url: str, pg: asyncpg.Connection, clock: VirtualClock
) -> None:
    storage = await PostgresStorage.open(pg_url)
    try:
        await storage.tasks.enqueue([new()], clock.now())
    finally:
        await storage.close()
    claim = postgres_queries().claim_tasks
    values = {"now": clock.now(), "limit": 10, "lease_token": token(), "lease_margin": MARGIN}
    async with pg.transaction():
        found = await pg.fetch(claim.sql, *claim.args(values))
        assert len(found) == 2  # the task and the row without one
        assert await commit_mode(pg) == "off"
    assert await commit_mode(pg) == "on"


async def test_after_claims_and_results_the_pooled_connection_still_commits_enqueues_synchronously(
    pg_url: str, clock: VirtualClock
) -> None:
    joiner = "&" if "?" in pg_url else "?"
    storage = await PostgresStorage.open(f"{pg_url}{joiner}pool_max_conns=1")  # one connection serves all
    try:
        await storage.tasks.enqueue([new(), new()], clock.now())
        claimed = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
        assert len(claimed) == 2
        results = [result_for(task, clock.now(), "succeeded") for task in claimed]
        summary = await storage.dispatch.record_results(results, clock.now())
        assert summary.accepted == 2
        pool = storage._pool  # what the next enqueue would use
        async with pool.acquire() as conn:
            assert await commit_mode(conn) == "on"
    finally:
        await storage.close()
