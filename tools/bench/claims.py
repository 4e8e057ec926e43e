"""Claim latency over deep, skewed backlogs, through the Storage API.

    python -m tools.bench.claims postgresql://postgres@127.0.0.1/bench_claims
    python -m tools.bench.claims sqlite:////tmp/bench-claims.db

The database is emptied first (it must be a scratch database). For each backlog size
(10,000 and 200,000 ready tasks) and each shape, it times 50 claims of up to 10 tasks,
recording each claim's results before the next, and prints the median and the 95th
percentile:

- plain: untenanted, unkeyed tasks;
- tenants: one tenant holds the backlog, 1,000 tenants have finished all their work (their
  turns stay stored), 10 small tenants have one task each;
- keys: an ordering=key queue where one key holds the backlog and 1,000 keys one task each.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

from workly.ids import new_task_id
from workly.models import AttemptResult, NewTask, QueueConfig
from workly.storage.contract import Storage
from workly.storage.factory import open_storage

CLAIMS, BATCH = 50, 10
URL = "http://127.0.0.1:9/"  # never contacted: nothing is delivered


def _task(queue: str, **fields: str) -> NewTask:
    return NewTask(id=new_task_id(), queue=queue, url=URL, **fields)  # type: ignore[arg-type]


async def _enqueue(storage: Storage, tasks: list[NewTask], now: datetime) -> None:
    for start in range(0, len(tasks), 1000):
        await storage.tasks.enqueue(tasks[start : start + 1000], now)


async def _finish_all(storage: Storage, now: datetime) -> None:
    while claimed := (await storage.dispatch.claim_tasks(1000, now, uuid.uuid4().hex, 30)).tasks:
        await storage.dispatch.record_results(
            [_succeeded(c.seq, c.lease_token, c.attempt, now) for c in claimed], now
        )


def _succeeded(seq: int, lease: str, attempt: int, now: datetime) -> AttemptResult:
    return AttemptResult(seq, lease, attempt, now, now, 200, None, b"", "succeeded", None)


async def _prepare(storage: Storage, shape: str, backlog: int, now: datetime) -> str:
    queue = f"{shape}-{backlog}"
    ordering = "key" if shape == "keys" else "none"
    await storage.queues.put_queue(queue, QueueConfig(max_concurrency=10_000, ordering=ordering), now)
    if shape == "plain":
        await _enqueue(storage, [_task(queue) for _ in range(backlog)], now)
    elif shape == "tenants":
        await _enqueue(storage, [_task(queue, tenant=f"idle{i}") for i in range(1000)], now)
        await _finish_all(storage, now)
        await _enqueue(storage, [_task(queue, tenant="big") for _ in range(backlog)], now)
        await _enqueue(storage, [_task(queue, tenant=f"small{i}") for i in range(10)], now)
    else:
        await _enqueue(storage, [_task(queue, key="big") for _ in range(backlog)], now)
        await _enqueue(storage, [_task(queue, key=f"k{i}") for i in range(1000)], now)
    return queue


async def _time_claims(storage: Storage, now: datetime) -> list[float]:
    took = []
    for _ in range(CLAIMS):
        started = time.perf_counter()
        claimed = (await storage.dispatch.claim_tasks(BATCH, now, uuid.uuid4().hex, 30)).tasks
        took.append(time.perf_counter() - started)
        await storage.dispatch.record_results(
            [_succeeded(c.seq, c.lease_token, c.attempt, now) for c in claimed], now
        )
    return took


async def main(url: str) -> None:
    storage = await open_storage(url, db_timeout=60)
    now = datetime.now(UTC)
    try:
        await storage.database.migrate()
        for queue in await storage.queues.list_queues():
            await storage.queues.delete_queue(queue.name)
        if await storage.database.needs_vacuum():
            await storage.upkeep.vacuum()
        print(f"{storage.dialect}: {CLAIMS} claims of up to {BATCH}, each followed by its results")
        for backlog in (10_000, 200_000):
            for shape in ("plain", "tenants", "keys"):
                queue = await _prepare(storage, shape, backlog, now)
                if await storage.database.needs_vacuum():
                    await storage.upkeep.vacuum()
                took = sorted(await _time_claims(storage, now + timedelta(seconds=1)))
                print(
                    f"  backlog {backlog:>7,} {shape:<8} median {statistics.median(took) * 1000:6.2f} ms"
                    f"  p95 {took[int(0.95 * (len(took) - 1))] * 1000:6.2f} ms"
                )
                await storage.queues.delete_queue(queue)
    finally:
        await storage.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    asyncio.run(main(sys.argv[1]))
