"""The Postgres claim reads the partial claim index in order and stops after the batch.

Seed 000: with an index that does not match the ORDER BY, the planner sorts the whole
backlog on every claim; the time can still look fine on a small table, so the test
reads the plan, over a deep backlog.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from workly.storage.queries import load_queries

pytestmark = pytest.mark.postgres
BACKLOG = 200_000


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(_nodes(child))
    return found


async def test_claim_uses_the_claim_index_without_sorting_the_backlog(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        now = datetime(2030, 1, 1, tzinfo=UTC)
        await conn.execute(
            """INSERT INTO queues (name, max_concurrency, created_at, updated_at)
               VALUES ('deep', 1000, $1, $1)""",
            now,
        )
        await conn.execute(
            """INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, priority,
                                  created_at, updated_at)
               SELECT 'task_' || g, 'deep', 'ready', 'http://127.0.0.1:9/', 'POST', '{}', '', $1,
                      g % 3, $1, $1
               FROM generate_series(1, $2) g""",
            now,
            BACKLOG,
        )
        await conn.execute("ANALYZE tasks")
        # EXPLAIN ANALYZE really runs the claim (100 rows); the next test empties the table.
        raw = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + load_queries("postgres").claim_tasks,
            now,
            100,
            "lease",
            30.0,
            [],
            [],
        )
        nodes = _nodes(json.loads(raw)[0]["Plan"])
    finally:
        await conn.close()
    scans_of_tasks = [n for n in nodes if n.get("Relation Name") == "tasks"]
    claim_scans = [n for n in scans_of_tasks if n.get("Index Name") == "tasks_claim"]
    assert claim_scans, f"the claim must read tasks_claim: {[n['Node Type'] for n in nodes]}"
    assert max(n["Actual Rows"] for n in claim_scans) <= 100, "the index scan stops after the batch"
    assert not [n for n in scans_of_tasks if n["Node Type"] == "Seq Scan"]
    sorts = [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
    assert all(n["Actual Rows"] <= 100 for n in sorts), "no Sort over the backlog"
