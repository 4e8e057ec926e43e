"""The charts' history (service/delivery_history.py) against a real SQLite storage: what a
process counted is written once, whether its write fails, is cancelled or is in flight."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

import pytest

from tests.support.clock import VirtualClock
from workly.delivery_stats import MinuteStats, Rollup, Scope, minute_of
from workly.errors import StorageUnavailable
from workly.service.delivery_history import DeliveryHistory
from workly.storage.contract import Storage
from workly.storage.factory import open_storage


class GatedStorage:
    """The history role of a real storage whose writes of delivery minutes wait for the test
    (or fail once); reads and pruning go straight through."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.fail_next = False

    async def add_delivery_minutes(self, stats: Sequence[MinuteStats]) -> None:
        self.entered.set()
        await self.release.wait()
        if self.fail_next:
            self.fail_next = False
            raise StorageUnavailable("the database went away")
        await self.storage.history.add_delivery_minutes(stats)

    async def delivery_minutes(self, scope: Scope, name: str | None, since: datetime) -> list[MinuteStats]:
        return await self.storage.history.delivery_minutes(scope, name, since)

    async def prune_delivery_minutes(self, before: datetime) -> None:
        await self.storage.history.prune_delivery_minutes(before)


@pytest.fixture
async def gated(sqlite_url: str) -> AsyncIterator[GatedStorage]:
    storage = await open_storage(sqlite_url)
    await storage.database.migrate()
    yield GatedStorage(storage)
    await storage.close()


def deliveries(rollup: Rollup, clock: VirtualClock, count: int) -> None:
    for _ in range(count):
        rollup.add("q", None, clock.now(), "succeeded", 0.02)


async def stored_succeeded(gated: GatedStorage, clock: VirtualClock) -> int:
    rows = await gated.storage.history.delivery_minutes("queue", "q", minute_of(clock.now()))
    return sum(row.succeeded for row in rows)


async def shown(history: DeliveryHistory) -> int:
    return sum(row.succeeded for row in await history.last_minutes("queue", "q", 1))


async def test_a_cancelled_flush_lets_its_write_finish_and_nothing_is_written_twice(
    gated: GatedStorage, clock: VirtualClock
) -> None:
    rollup = Rollup()
    history = DeliveryHistory(gated, clock, rollup)
    deliveries(rollup, clock, 3)
    flush = asyncio.create_task(history.flush())
    await gated.entered.wait()
    assert await shown(history) == 3  # in flight: still shown, from this process
    flush.cancel()  # the housekeeper stopping
    with pytest.raises(asyncio.CancelledError):
        await flush
    deliveries(rollup, clock, 2)
    gated.release.set()
    await history.flush()  # the last flush, at stop: waits for the write, then writes the rest
    assert await stored_succeeded(gated, clock) == 5
    assert await shown(history) == 5


async def test_a_failed_write_is_written_by_the_next_flush(gated: GatedStorage, clock: VirtualClock) -> None:
    rollup = Rollup()
    history = DeliveryHistory(gated, clock, rollup)
    deliveries(rollup, clock, 4)
    gated.fail_next = True
    gated.release.set()
    with pytest.raises(StorageUnavailable):
        await history.flush()
    assert await stored_succeeded(gated, clock) == 0
    assert await shown(history) == 4  # kept, not lost
    await history.flush()
    assert await stored_succeeded(gated, clock) == 4
    assert await shown(history) == 4


async def test_a_cancelled_write_that_then_fails_is_written_by_the_last_flush(
    gated: GatedStorage, clock: VirtualClock
) -> None:
    rollup = Rollup()
    history = DeliveryHistory(gated, clock, rollup)
    deliveries(rollup, clock, 2)
    flush = asyncio.create_task(history.flush())
    await gated.entered.wait()
    flush.cancel()  # the housekeeper stopping while the write runs
    with pytest.raises(asyncio.CancelledError):
        await flush
    gated.fail_next = True
    gated.release.set()
    await history.flush()  # the service's last flush: the failed write's rows, not its error
    assert await stored_succeeded(gated, clock) == 2
