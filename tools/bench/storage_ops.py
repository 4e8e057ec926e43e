"""Storage operations per second, one after another (no concurrency): the cost of a call.

    python -m tools.bench.storage_ops sqlite:////tmp/bench.db
    python -m tools.bench.storage_ops postgresql://postgres@127.0.0.1/bench

Measures single-task enqueues, 100-task enqueues, and claim+record cycles of 100 tasks.
Uses the real backends; the database is emptied (queue ``bench`` deleted) first.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from datetime import UTC, datetime

from workly.errors import QueueNotFound
from workly.ids import new_task_id
from workly.models import AttemptResult, NewTask, QueueConfig
from workly.storage.factory import open_storage

URL = "http://127.0.0.1:9/"


def _task() -> NewTask:
    return NewTask(id=new_task_id(), queue="bench", url=URL, body=b'{"n":1}')


async def main(url: str, seconds: float = 3.0) -> None:
    storage = await open_storage(url)
    await storage.database.migrate()
    with contextlib.suppress(QueueNotFound):
        await storage.queues.delete_queue("bench")
    await storage.queues.put_queue("bench", QueueConfig(max_concurrency=100_000), datetime.now(UTC))

    async def rate(label: str, op: object, per_call: int) -> None:
        assert callable(op)
        calls, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            await op()
            calls += 1
        elapsed = time.perf_counter() - started
        print(f"{label:<32} {calls / elapsed:>9,.0f} calls/s  {calls * per_call / elapsed:>10,.0f} tasks/s")

    async def enqueue_one() -> None:
        await storage.tasks.enqueue([_task()], datetime.now(UTC))

    async def enqueue_hundred() -> None:
        await storage.tasks.enqueue([_task() for _ in range(100)], datetime.now(UTC))

    async def claim_and_record() -> None:
        now = datetime.now(UTC)
        claimed = (await storage.dispatch.claim_tasks(100, now, uuid.uuid4().hex, 30)).tasks
        results = [
            AttemptResult(task_seq=c.seq, lease_token=c.lease_token, attempt=c.attempt, started_at=now,
                          finished_at=now, status_code=204, error=None, response=b"", outcome="succeeded")
            for c in claimed
        ]  # fmt: skip
        await storage.dispatch.record_results(results, now)

    await rate("enqueue, 1 task per call", enqueue_one, 1)
    await rate("enqueue, 100 tasks per call", enqueue_hundred, 100)
    await rate("claim 100 + record 100", claim_and_record, 100)
    await storage.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
