"""Wake-ups between processes over LISTEN/NOTIFY: sent only when another process listens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from workly.storage.postgres import PostgresStorage

pytestmark = pytest.mark.postgres


class Process:
    """One PostgresStorage, as one Workly process has, counting its wake-ups."""

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage
        self.woken = 0

    def on_work(self) -> None:
        self.woken += 1


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


@pytest.fixture
async def processes(pg_url: str) -> AsyncIterator[list[Process]]:
    opened = [Process(await PostgresStorage.open(pg_url)) for _ in range(2)]
    yield opened
    for process in opened:
        await process.storage.close()


async def test_a_process_alone_sends_no_announcements(processes: list[Process]) -> None:
    alone = processes[0]
    await alone.storage.listen_for_work(alone.on_work)
    await until(lambda: alone.woken == 1)  # once on connecting: whatever it may have missed
    await asyncio.sleep(0.2)  # its own hello has come back by now, and was ignored
    await alone.storage.announce_work()
    assert alone.storage.wakeups.announced == 0
    assert alone.storage.wakeups.peers == set()


async def test_announcements_wake_the_other_process_not_the_sender(processes: list[Process]) -> None:
    a, b = processes
    for process in processes:
        await process.storage.listen_for_work(process.on_work)
    await until(lambda: a.storage.wakeups.peers == {b.storage.wakeups.id})
    await until(lambda: b.storage.wakeups.peers == {a.storage.wakeups.id})
    woken_a, woken_b = a.woken, b.woken
    await b.storage.announce_work()
    await until(lambda: a.woken == woken_a + 1)
    await asyncio.sleep(0.1)
    assert b.woken == woken_b
    assert b.storage.wakeups.announced == 1


async def test_a_process_that_says_goodbye_is_no_longer_announced_to(processes: list[Process]) -> None:
    a, b = processes
    for process in processes:
        await process.storage.listen_for_work(process.on_work)
    await until(lambda: bool(a.storage.wakeups.peers))
    await b.storage.close()
    await until(lambda: not a.storage.wakeups.peers)
    await a.storage.announce_work()
    assert a.storage.wakeups.announced == 0
