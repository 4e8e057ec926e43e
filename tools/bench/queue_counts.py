"""What ``GET /v1/queues`` and the dashboard overview pay for their task counts, by table size.

    python -m tools.bench.queue_counts sqlite:////tmp/bench-counts.db 200000
    python -m tools.bench.queue_counts postgresql://postgres@127.0.0.1/bench_counts 200000

Fills ten queues with the given number of tasks (a tenth of them claimed and recorded, so that
several statuses are counted), then times ``list_queues`` and ``get_queue`` one call after another.
Prints medians. The queues ``counts-0`` … ``counts-9`` are deleted first and at the end. Runs
against any checkout (``PYTHONPATH=<tree>``), so that an older tree's GROUP BY can be compared
with the counts table of migration 0014.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from workly.errors import QueueNotFound
from workly.ids import new_task_id
from workly.models import AttemptResult, NewTask, QueueConfig
from workly.storage.contract import Storage
from workly.storage.factory import open_storage

URL = "http://127.0.0.1:9/"
QUEUES = [f"counts-{n}" for n in range(10)]
BATCH = 1_000


async def _drop_queues(storage: Storage) -> None:
    for name in QUEUES:
        with contextlib.suppress(QueueNotFound):
            await storage.queues.delete_queue(name)


async def _fill(storage: Storage, total: int) -> None:
    now = datetime.now(UTC)
    for name in QUEUES:
        await storage.queues.put_queue(name, QueueConfig(max_concurrency=100_000), now)
    for start in range(0, total, BATCH):
        queue = QUEUES[(start // BATCH) % len(QUEUES)]
        size = min(BATCH, total - start)
        tasks = [NewTask(id=new_task_id(), queue=queue, url=URL, body=b"{}") for _ in range(size)]
        await storage.tasks.enqueue(tasks, now)
    done = 0
    while done < total // 10:
        claimed = (await storage.dispatch.claim_tasks(BATCH, now, uuid.uuid4().hex, 30)).tasks
        results = [
            AttemptResult(task_seq=c.seq, lease_token=c.lease_token, attempt=c.attempt, started_at=now,
                          finished_at=now, status_code=204, error=None, response=b"", outcome="succeeded")
            for c in claimed
        ]  # fmt: skip
        await storage.dispatch.record_results(results, now)
        done += len(claimed)
    fold = getattr(storage, "fold_task_counts", None)  # absent before migration 0014
    if fold is not None:
        await fold()


async def _median_ms(op: Callable[[], Awaitable[object]], calls: int) -> float:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await op()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def main(url: str, total: int, calls: int = 50) -> None:
    storage = await open_storage(url)
    await storage.database.migrate()
    await _drop_queues(storage)
    started = time.perf_counter()
    await _fill(storage, total)
    print(f"filled {total:,} tasks in {time.perf_counter() - started:.1f} s")
    queues = await storage.queues.list_queues()
    counted = sum(sum(q.counts.values()) for q in queues if q.name in QUEUES)
    print(f"tasks counted by list_queues: {counted:,}")
    print(f"list_queues          median {await _median_ms(storage.queues.list_queues, calls):8.2f} ms")
    one = await _median_ms(lambda: storage.queues.get_queue(QUEUES[0]), calls)
    print(f"get_queue(counts-0)  median {one:8.2f} ms")
    await _drop_queues(storage)
    await storage.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200_000))
