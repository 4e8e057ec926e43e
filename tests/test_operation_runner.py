"""The operation runner on a real SQLite storage: it works an operation to its end, and one
that stops between chunks gives the operation back for the next runner to go on at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.storage.helpers import in_queue, new, result_for, token
from tests.support.clock import VirtualClock
from workly.ids import new_id
from workly.models import QueueConfig
from workly.operations import TaskFilter
from workly.service.operation_runner import OperationRunner
from workly.storage.contract import Storage
from workly.storage.sqlite import SqliteStorage


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    opened = await SqliteStorage.open(f"sqlite:///{tmp_path / 'runner.db'}")
    await opened.database.migrate()
    yield opened
    await opened.close()


async def failed_tasks(storage: Storage, clock: VirtualClock, n: int) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new(max_attempts=1) for _ in range(n)]), clock.now())
    claimed = (await storage.dispatch.claim_tasks(n, clock.now(), token(), 30)).tasks
    await storage.dispatch.record_results(
        [result_for(c, clock.now(), "failed", 500) for c in claimed], clock.now()
    )


async def test_a_runner_works_an_operation_to_its_end_and_wakes_the_dispatchers(storage: Storage) -> None:
    clock = VirtualClock()
    await failed_tasks(storage, clock, 5)
    woken = 0

    def work_available() -> None:
        nonlocal woken
        woken += 1

    created = await storage.operations.create_operation(
        new_id("op"), "retry", TaskFilter(queue="q"), clock.now()
    )
    runner = OperationRunner(storage.operations, clock, work_available, chunk=2)
    await runner.run_pending()
    done = await storage.operations.get_operation(created.id)
    assert done is not None and (done.state, done.changed) == ("succeeded", 5)
    assert woken == 3  # once per chunk that made tasks claimable


async def test_a_stopping_runner_gives_the_operation_back(storage: Storage) -> None:
    clock = VirtualClock()
    await failed_tasks(storage, clock, 6)
    created = await storage.operations.create_operation(
        new_id("op"), "retry", TaskFilter(queue="q"), clock.now()
    )
    first_chunk = asyncio.Event()
    runner: OperationRunner

    def work_available() -> None:
        first_chunk.set()

    runner = OperationRunner(storage.operations, clock, work_available, chunk=2)
    runner.wake()
    await first_chunk.wait()
    await runner.stop()  # between chunks: its lease is given back
    stopped = await storage.operations.get_operation(created.id)
    assert stopped is not None and stopped.state == "running" and 2 <= stopped.changed < 6
    taken = await storage.operations.take_operation(clock.now(), token(), 15)  # at once, on the same clock
    assert taken is not None and taken.id == created.id
