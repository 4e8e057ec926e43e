"""What PostgreSQL spends planning and running the hot statements, per call.

    python -m tools.bench.statement_costs postgresql://postgres@127.0.0.1/bench_statements [-runs 40]

The database must be a scratch one: it is migrated, and each statement runs inside a
transaction that is rolled back, so nothing stays. For the claim (batch of 8, one queue
holding 8 ready tasks), the enqueue of 8 tasks and the eager enqueue of 8 tasks
(enqueue_tasks_leasing), it prints the median planning and execution time of
``EXPLAIN (ANALYZE, SUMMARY)`` over ``-runs`` calls (a custom plan, made for the call), and
the median time of one call as Workly makes it, a prepared statement, on a connection with
``plan_cache_mode`` auto (PostgreSQL's default: after five calls it may keep a generic
plan and stop planning) and one with force_generic_plan, their calls interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from workly.ids import new_task_id
from workly.models import NewTask
from workly.storage.postgres import PostgresStorage
from workly.storage.postgres.enqueue import task_columns
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
        await storage.database.migrate()
        now = datetime.now(UTC)
        await storage.tasks.enqueue(_tasks(), now)  # the queue, with 8 ready tasks for the claim
    finally:
        await storage.close()
    conn = await asyncpg.connect(url)
    modes = ("auto", "force_generic_plan")
    prepared = {mode: await asyncpg.connect(url, server_settings={"plan_cache_mode": mode}) for mode in modes}
    try:
        print(f"{'statement':24} {'planning':>9} {'execution':>10} {'call, auto':>11} {'call, generic':>14}")
        for name, query, params in _statements(now):
            costs = [await _explained(conn, query, params()) for _ in range(runs)]
            planning = statistics.median(c[0] for c in costs)
            execution = statistics.median(c[1] for c in costs)
            calls = await _calls(prepared, query, params, runs)
            print(
                f"{name:24} {planning:12.3f} {execution:13.3f} {calls['auto']:11.3f} {calls[modes[1]]:14.3f}"
            )
        print(f"(milliseconds, medians of {runs})")
    finally:
        await conn.close()
        for each in prepared.values():
            await each.close()


async def _calls(
    conns: dict[str, asyncpg.Connection], query: Query, params: Callable[[], dict[str, Any]], runs: int
) -> dict[str, float]:
    """The median time of one prepared call per connection, rolled back, after five calls
    (PostgreSQL chooses between custom and generic plans from the sixth on)."""
    statements = {mode: await conn.prepare(query.sql) for mode, conn in conns.items()}
    times: dict[str, list[float]] = {mode: [] for mode in conns}
    for _ in range(runs + 5):
        for mode, conn in conns.items():
            transaction = conn.transaction()
            await transaction.start()
            try:
                started = time.perf_counter()
                await statements[mode].fetch(*query.args(params()))
                times[mode].append(time.perf_counter() - started)
            finally:
                await transaction.rollback()
    return {mode: statistics.median(found[5:]) * 1000 for mode, found in times.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a scratch PostgreSQL database")
    parser.add_argument("-runs", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.runs))
