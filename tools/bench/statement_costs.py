"""What PostgreSQL spends planning and running the hot statements, per call.

    python -m tools.bench.statement_costs postgresql://postgres@127.0.0.1/bench_statements [-runs 40]

The database must be a scratch one: it is migrated, and each statement runs inside a
transaction that is rolled back, so nothing stays. For the claim (batch of 8, one queue
holding 8 ready tasks), the enqueue of 8 tasks and the eager enqueue of 8 tasks
(enqueue_tasks_leasing), it prints the median planning and execution time of
``EXPLAIN (ANALYZE, SUMMARY)`` over ``-runs`` calls. Workly's connections plan each call
afresh (custom plans), so the planning time is paid on every call, as PostgreSQL CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from workly.ids import new_task_id
from workly.models import NewTask
from workly.storage.postgres import PostgresStorage
from workly.storage.postgres_enqueue import task_columns
from workly.storage.queries import Query, postgres_queries

_TASKS = 8


def _tasks() -> list[NewTask]:
    return [NewTask(id=new_task_id(), queue="bench", url="http://127.0.0.1:9/") for _ in range(_TASKS)]


def _statements(now: datetime) -> list[tuple[str, Query, Callable[[], dict[str, Any]]]]:
    q = postgres_queries()
    lease = {"lease_queues": ["bench"], "limit": _TASKS, "lease_token": "bench", "lease_margin": 30.0}
    return [
        (
            "claim_tasks",
            q.claim_tasks,
            lambda: {"now": now, "limit": _TASKS, "lease_token": "t", "lease_margin": 30.0},
        ),
        ("enqueue_tasks", q.enqueue_tasks, lambda: {"now": now, **task_columns(_tasks())}),
        (
            "enqueue_tasks_leasing",
            q.enqueue_tasks_leasing,
            lambda: {"now": now, **task_columns(_tasks()), **lease},
        ),
    ]


async def _explained(conn: asyncpg.Connection, query: Query, params: dict[str, Any]) -> tuple[float, float]:
    transaction = conn.transaction()
    await transaction.start()
    try:
        raw = await conn.fetchval("EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + query.sql, *query.args(params))
    finally:
        await transaction.rollback()
    found = json.loads(raw)[0]
    return float(found["Planning Time"]), float(found["Execution Time"])


async def main(url: str, runs: int) -> None:
    storage = await PostgresStorage.open(url)
    try:
        await storage.migrate()
        now = datetime.now(UTC)
        await storage.enqueue(_tasks(), now)  # the queue, with 8 ready tasks for the claim
    finally:
        await storage.close()
    conn = await asyncpg.connect(url)
    try:
        print(f"{'statement':24} {'planning ms':>12} {'execution ms':>13}   (medians of {runs})")
        for name, query, params in _statements(now):
            costs = [await _explained(conn, query, params()) for _ in range(runs)]
            planning = statistics.median(c[0] for c in costs)
            execution = statistics.median(c[1] for c in costs)
            print(f"{name:24} {planning:12.3f} {execution:13.3f}")
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a scratch PostgreSQL database")
    parser.add_argument("-runs", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.runs))
