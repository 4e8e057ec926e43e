"""The Postgres claim stays cheap however the backlog is skewed: read from the plan.

Seed 000: with an index that does not match the ORDER BY, the planner sorts the whole
backlog on every claim. Seed 004: a round-robin claim over tenants looked fine on a small
table and took 10 s with one tenant's 100,000 tasks and 1,000 idle tenants. The time
can still look fine on a small table, so these tests read the plan over deep backlogs:
which indexes it reads, how many rows each scan returns, and how many buffers it touches.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from workly.models import NewTask
from workly.storage.postgres.enqueue import task_columns
from workly.storage.queries import postgres_queries

pytestmark = pytest.mark.postgres
NOW = datetime(2030, 1, 1, tzinfo=UTC)
BATCH = 100


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(_nodes(child))
    return found


async def _queue(conn: asyncpg.Connection, name: str, ordering: str = "none") -> None:
    await conn.execute(
        """INSERT INTO queues (name, max_concurrency, ordering, created_at, updated_at)
           VALUES ($1, 10000, $2, $3, $3)""",
        name,
        ordering,
        NOW,
    )


async def _tasks(
    conn: asyncpg.Connection, queue: str, count: int, *, tenant: str = "NULL", key: str = "NULL"
) -> None:
    """``count`` ready tasks; ``tenant`` and ``key`` are SQL expressions over g (1..count)."""
    await conn.execute(
        f"""INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, priority,
                               tenant, key, created_at, updated_at)
            SELECT $1 || '_' || gen_random_uuid(), $1, 'ready', 'http://127.0.0.1:9/', 'POST', '{{}}', '',
                   $2, g % 3, {tenant}, {key}, $2, $2
            FROM generate_series(1, $3) g""",
        queue,
        NOW,
        count,
    )


async def _explain_claim(conn: asyncpg.Connection) -> tuple[list[dict[str, Any]], int, int]:
    """The claim's plan nodes, the rows it claimed and the buffers it touched.
    EXPLAIN ANALYZE really runs it, inside a transaction rolled back afterwards."""
    claim = postgres_queries().claim_tasks
    params = {"now": NOW, "limit": BATCH, "lease_token": "lease", "lease_margin": 30.0}
    return _read_plan(await explain(conn, claim.sql, claim.args(params)))


async def explain(conn: asyncpg.Connection, sql: str, args: list[Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of a statement (it really runs), in a transaction rolled back."""
    await conn.execute("ANALYZE")
    transaction = conn.transaction()
    await transaction.start()
    try:
        raw = await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, *args)
    finally:
        await transaction.rollback()
    found: dict[str, Any] = json.loads(raw)[0]
    return found


def _read_plan(explained: dict[str, Any]) -> tuple[list[dict[str, Any]], int, int]:
    plan = explained["Plan"]
    nodes = _nodes(plan)
    claimed = next(
        n for n in nodes if n.get("Node Type") == "ModifyTable" and n.get("Relation Name") == "tasks"
    )
    buffers = int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))
    return nodes, int(claimed["Actual Rows"]), buffers


def _assert_no_backlog_scan(nodes: list[dict[str, Any]], groups: int = 0) -> None:
    """No scan of the whole table, and no sort of more than the batch and one head per group."""
    scans = [n for n in nodes if n.get("Relation Name") == "tasks"]
    assert not [n for n in scans if n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")], [
        n["Node Type"] for n in scans
    ]
    sorts = [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
    assert all(n["Actual Rows"] <= 2 * BATCH + groups for n in sorts), "no Sort over the backlog"


@pytest.fixture
async def conn(pg_url: str) -> Any:
    connection = await asyncpg.connect(pg_url)
    yield connection
    await connection.close()


async def test_a_deep_plain_backlog_is_read_in_index_order(conn: asyncpg.Connection) -> None:
    await _queue(conn, "deep")
    await _tasks(conn, "deep", 200_000)
    nodes, claimed, buffers = await _explain_claim(conn)
    assert claimed == BATCH
    plain = [n for n in nodes if n.get("Index Name") == "tasks_claim"]
    assert plain, f"the claim must read tasks_claim: {[n['Node Type'] for n in nodes]}"
    assert max(n["Actual Rows"] for n in plain) <= BATCH, "the index scan stops after the batch"
    _assert_no_backlog_scan(nodes)
    assert buffers < 6_000, buffers  # the table itself holds over 10,000 pages


async def test_one_huge_tenant_and_many_idle_ones(conn: asyncpg.Connection) -> None:
    """Seed 004's shape: 100,000 ready tasks of one tenant, 1,000 tenants without ready
    work (their finished tasks and their turns are still stored), ten small tenants."""
    await _queue(conn, "shared")
    await _tasks(conn, "shared", 100_000, tenant="'big'")
    await _tasks(conn, "shared", 1_000, tenant="'idle' || g")
    await conn.execute("UPDATE tasks SET status = 'succeeded' WHERE tenant LIKE 'idle%'")
    await conn.execute(
        """INSERT INTO queue_turns (queue, tenant, last_served)
           SELECT 'shared', 'idle' || g, $1 FROM generate_series(1, 1000) g""",
        NOW,
    )
    await _tasks(conn, "shared", 10, tenant="'small' || g")
    nodes, claimed, buffers = await _explain_claim(conn)
    assert claimed >= 11  # every tenant's share: the batch fills over the next claims
    per_tenant = [n for n in nodes if n.get("Index Name") == "tasks_claim_tenant"]
    assert per_tenant, [n["Node Type"] for n in nodes]
    assert max(n["Actual Rows"] for n in per_tenant) <= BATCH
    _assert_no_backlog_scan(nodes)
    assert buffers < 6_000, buffers  # the table itself holds over 10,000 pages


async def test_one_huge_key_and_many_small_ones(conn: asyncpg.Connection) -> None:
    await _queue(conn, "ordered", ordering="key")
    await _tasks(conn, "ordered", 100_000, key="'big'")
    await _tasks(conn, "ordered", 1_000, key="'k' || g")
    nodes, claimed, buffers = await _explain_claim(conn)
    assert claimed == BATCH  # one head per key, from the first hundred keys' heads
    by_key = [n for n in nodes if n.get("Index Name") == "tasks_claim_key"]
    assert by_key, [n["Node Type"] for n in nodes]
    _assert_no_backlog_scan(nodes, groups=1_001)
    assert buffers < 20_000, buffers


async def test_tenants_and_keys_of_queues_without_room_are_not_visited(conn: asyncpg.Connection) -> None:
    """A paused queue's 20,000 keys and a full queue's tenants cost the claim nothing."""
    await _queue(conn, "paused", ordering="key")
    await _tasks(conn, "paused", 20_000, key="'k' || g")
    await conn.execute("UPDATE queues SET paused = true WHERE name = 'paused'")
    await _queue(conn, "full")
    await _tasks(conn, "full", 20_000, tenant="'t' || g")
    await conn.execute("UPDATE queues SET max_concurrency = 1, running = 1 WHERE name = 'full'")
    await _queue(conn, "open")
    await _tasks(conn, "open", 10)
    nodes, claimed, buffers = await _explain_claim(conn)
    assert claimed == 10
    unions = [n for n in nodes if n["Node Type"] == "Recursive Union"]
    assert all(n["Actual Rows"] == 0 for n in unions), [n["Actual Rows"] for n in unions]
    assert buffers < 1_000, buffers


async def test_a_claim_visits_no_queue_with_nothing_ready(conn: asyncpg.Connection) -> None:
    """The probe that keeps a claim off a queue with nothing ready reads one index entry,
    however deep the queues it passes over are (a walk of the primary key would not)."""
    for name in ("a-deep", "b-deep-tenants", "c-deep-keys"):
        await _queue(conn, name)
    await _tasks(conn, "a-deep", 50_000)
    await _tasks(conn, "b-deep-tenants", 50_000, tenant="'t' || g")
    await _tasks(conn, "c-deep-keys", 50_000, key="'k' || g")
    await conn.execute("UPDATE queues SET max_concurrency = 0")  # nothing to take anywhere
    await _queue(conn, "z-idle")
    nodes, claimed, buffers = await _explain_claim(conn)
    assert claimed == 0
    _assert_no_backlog_scan(nodes)
    assert buffers < 200, buffers


async def test_an_eager_enqueue_reads_no_backlog(conn: asyncpg.Connection) -> None:
    """enqueue_tasks_leasing probes its queues for ready work in index order: a queue with
    a deep backlog of each kind costs it a few index entries, not the backlog."""
    for name in ("plain", "tenants", "keys", "idle"):
        await _queue(conn, name)
    await _tasks(conn, "plain", 50_000)
    await _tasks(conn, "tenants", 50_000, tenant="'t' || g")
    await _tasks(conn, "keys", 50_000, key="'k' || g")
    await conn.execute("ANALYZE")
    tasks = [
        NewTask(
            id=f"eager-{queue}", queue=queue, url="http://127.0.0.1:9/", method="POST", headers={}, body=b""
        )
        for queue in ("idle", "keys", "plain", "tenants")
    ]
    query = postgres_queries().enqueue_tasks_leasing
    params = {
        "now": NOW, **task_columns(tasks), "lease_queues": sorted(t.queue for t in tasks), "limit": 10,
        "lease_token": "lease", "lease_margin": 30.0,
    }  # fmt: skip
    transaction = conn.transaction()
    await transaction.start()
    try:
        raw = await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query.sql, *query.args(params))
        leased = await conn.fetch("SELECT queue FROM tasks WHERE id LIKE 'eager-%' AND status = 'running'")
    finally:
        await transaction.rollback()
    plan = json.loads(raw)[0]["Plan"]
    _assert_no_backlog_scan(_nodes(plan))
    assert [row["queue"] for row in leased] == ["idle"]  # the others hold ready work
    assert int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)) < 300
