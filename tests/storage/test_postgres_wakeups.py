"""Wake-ups between processes over LISTEN/NOTIFY: sent only when another process listens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from tests.support.clock import VirtualClock
from tests.support.pg_waits import NotificationProbe
from workly.storage.postgres import PostgresStorage
from workly.storage.postgres import notifier as postgres_notifier
from workly.storage.postgres.notifier import CHANNEL, channel_of

pytestmark = pytest.mark.postgres
VISITOR = "7e57" * 8  # the id (32 hex digits) of a process the test plays with a plain connection


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


async def test_a_process_alone_sends_no_announcements(processes: list[Process], pg_url: str) -> None:
    alone = processes[0]
    await alone.storage.notifier.listen_for_work(alone.on_work)  # returns once its hello has been sent
    await until(lambda: alone.woken == 1)  # once on connecting: whatever it may have missed
    # Its own hello comes back to it, and must be ignored. Ignoring leaves no trace, so a
    # visitor says hello after it: notifications arrive in commit order, so once the visitor
    # is among its peers the hello before it has been handled too, without making it a peer.
    probe = await NotificationProbe.listen(pg_url, CHANNEL)
    try:
        await probe.notify(f"hello:{VISITOR}")
        await until(lambda: VISITOR in alone.storage.notifier.peers)
        assert alone.storage.notifier.peers == {VISITOR}
        # It answers the newcomer with a hello of its own; once the probe hears that answer,
        # the visitor leaves: its bye comes after the answer, which is then handled as well.
        hello_seen = await probe.wait_for(f"hello:{VISITOR}")
        await probe.wait_for(f"hello:{alone.storage.notifier.id}", after=hello_seen + 1)
        await probe.notify(f"bye:{VISITOR}")
        await until(lambda: not alone.storage.notifier.peers)  # alone again
    finally:
        await probe.close()
    await alone.storage.notifier.announce_work()
    assert alone.storage.notifier.announced == 0
    assert alone.storage.notifier.peers == set()


async def test_announcements_wake_the_other_process_not_the_sender(
    processes: list[Process], pg_url: str
) -> None:
    a, b = processes
    for process in processes:
        await process.storage.notifier.listen_for_work(process.on_work)
    await until(lambda: a.storage.notifier.peers == {b.storage.notifier.id})
    await until(lambda: b.storage.notifier.peers == {a.storage.notifier.id})
    woken_a, woken_b = a.woken, b.woken
    await b.storage.notifier.announce_work()
    await until(lambda: a.woken == woken_a + 1)
    # b's announcement comes back to b too, and must not wake it. To know that it has come
    # back, a visitor says hello after it (notifications arrive in commit order): once b
    # counts the visitor among its peers, it has handled its own announcement before.
    probe = await NotificationProbe.listen(pg_url, CHANNEL)
    try:
        await probe.notify(f"hello:{VISITOR}")
        await until(lambda: VISITOR in b.storage.notifier.peers)
    finally:
        await probe.close()
    assert b.woken == woken_b
    assert b.storage.notifier.announced == 1


async def test_a_process_that_says_goodbye_is_no_longer_announced_to(processes: list[Process]) -> None:
    a, b = processes
    for process in processes:
        await process.storage.notifier.listen_for_work(process.on_work)
    await until(lambda: bool(a.storage.notifier.peers))
    await b.storage.close()
    await until(lambda: not a.storage.notifier.peers)
    await a.storage.notifier.announce_work()
    assert a.storage.notifier.announced == 0


async def _arrivals(pg_url: str) -> int:
    conn = await asyncpg.connect(pg_url)
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM sql_arrivals")
        return count
    finally:
        await conn.close()


async def test_a_task_enqueued_from_sql_wakes_the_dispatcher_at_its_commit_only(
    processes: list[Process], pg_url: str
) -> None:
    process = processes[0]
    await process.storage.notifier.listen_for_work(process.on_work, sql_poll_interval=0.01)
    await until(lambda: process.woken == 1)  # once on connecting
    app = await asyncpg.connect(pg_url)
    try:
        async with app.transaction():
            await app.fetchval("SELECT enqueue_task(queue => 'q', url => 'http://127.0.0.1:9/')")
            # Uncommitted, its arrival is invisible: several looks find nothing to take.
            looked = process.storage.notifier.sql_looks
            await until(lambda: process.storage.notifier.sql_looks >= looked + 3)
            assert process.woken == 1
        await until(lambda: process.woken == 2)  # the commit
        await until(lambda: process.storage.notifier.sql_looks >= looked + 6)
        assert await _arrivals(pg_url) == 0  # taken, so it wakes once
        assert process.woken == 2
        rolled_back = app.transaction()
        await rolled_back.start()
        await app.fetchval("SELECT enqueue_task(queue => 'q', url => 'http://127.0.0.1:9/')")
        await rolled_back.rollback()
        looked = process.storage.notifier.sql_looks
        await until(lambda: process.storage.notifier.sql_looks >= looked + 3)
        assert process.woken == 2  # a rollback wakes nobody
    finally:
        await app.close()


async def test_without_a_poll_interval_nobody_looks_for_sql_arrivals(
    processes: list[Process], pg_url: str
) -> None:
    process = processes[0]
    await process.storage.notifier.listen_for_work(process.on_work)
    app = await asyncpg.connect(pg_url)
    try:
        await app.fetchval("SELECT enqueue_task(queue => 'q', url => 'http://127.0.0.1:9/')")
    finally:
        await app.close()
    assert process.storage.notifier.sql_looks == 0
    assert await _arrivals(pg_url) == 1


def test_each_schema_has_its_own_channel_and_public_keeps_the_old_one() -> None:
    assert channel_of("public") == CHANNEL
    assert channel_of("workly") == f"{CHANNEL}.workly"
    long_a, long_b = "a" * 62 + "x", "a" * 62 + "y"
    assert len(channel_of(long_a)) <= 63
    assert channel_of(long_a) != channel_of(long_b)


async def test_looks_are_frequent_only_once_the_sql_functions_are_in_use(pg_fresh_db: str) -> None:
    first = Process(await PostgresStorage.open(pg_fresh_db))
    await first.storage.database.migrate()
    try:
        await first.storage.notifier.listen_for_work(first.on_work, sql_poll_interval=0.01)
        wakeups = first.storage.notifier
        assert not wakeups.sql_in_use  # a new database: a look a second
        app = await asyncpg.connect(pg_fresh_db)
        try:
            await app.fetchval("SELECT enqueue_task(queue => 'q', url => 'http://127.0.0.1:9/')")
            await until(lambda: wakeups.sql_in_use)  # it took the arrival: from now on, every 10 ms
            looked = wakeups.sql_looks
            await until(lambda: wakeups.sql_looks >= looked + 20, timeout=5)
            # PostgreSQL's statistics now count the arrival, so a process that starts next knows.
            used = "SELECT n_tup_ins > 0 FROM pg_stat_user_tables WHERE relname = 'sql_arrivals'"

            async def counted() -> None:
                while not await app.fetchval(used):  # each statement lets this backend report
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(counted(), timeout=15)
        finally:
            await app.close()
    finally:
        await first.storage.close()
    second = Process(await PostgresStorage.open(pg_fresh_db))
    try:
        await second.storage.notifier.listen_for_work(second.on_work, sql_poll_interval=0.01)
        assert second.storage.notifier.sql_in_use
    finally:
        await second.storage.close()


async def test_a_listen_connection_refused_right_after_it_connects_backs_off(
    pg_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Behind a PgBouncer in transaction mode every new LISTEN connection failed at its first
    # statement (asyncpg's prepared statements), and the listener reconnected at once, about
    # 400 times a second. Now it waits 0.5 s, then 1 s, as after a failed connect.
    async def refused(conn: asyncpg.Connection, schema: str) -> None:
        raise asyncpg.exceptions.DuplicatePreparedStatementError(
            'prepared statement "__asyncpg_stmt_1__" exists'
        )

    monkeypatch.setattr(postgres_notifier, "use_schema", refused)
    clock = VirtualClock()
    process = Process(await PostgresStorage.open(pg_url, clock=clock))

    def failures() -> int:
        return sum("LISTEN connection failed" in r.getMessage() for r in caplog.records)

    try:
        listening = asyncio.create_task(
            process.storage.notifier.listen_for_work(process.on_work, first_wait=0.1)
        )
        await until(lambda: failures() == 1)
        clock.advance(0.1)  # the first wait is over: the listener goes on trying in the background
        await listening
        assert clock.next_due == pytest.approx(0.4)  # 0.5 s after the refusal, not at once
        clock.advance(0.4)
        await until(lambda: failures() == 2)
        assert clock.next_due == pytest.approx(1.0)  # then 1 s
    finally:
        await process.storage.close()


async def test_a_flood_of_made_up_notifications_costs_bounded_memory(
    processes: list[Process], pg_url: str
) -> None:
    """Any role of the database may NOTIFY on the channel: 50,000 made-up senders leave at
    most MAX_PEERS peers remembered, and payloads that are not Workly's are ignored."""
    listener = processes[0]
    await listener.storage.notifier.listen_for_work(listener.on_work)
    await until(lambda: listener.woken == 1)
    flooder = await asyncpg.connect(pg_url)
    probe = await NotificationProbe.listen(pg_url, CHANNEL)
    try:
        await flooder.execute(
            "SELECT pg_notify($1, 'work:' || md5(n::text)) FROM generate_series(1, 50000) AS n", CHANNEL
        )
        for junk in ("work", "work:", "work:xyz", "shout:" + "0" * 32, "work:" + "A" * 32, "x" * 7000):
            await flooder.execute("SELECT pg_notify($1, $2)", CHANNEL, junk)
        await probe.notify(f"hello:{VISITOR}")  # handled after everything before it
        await until(lambda: VISITOR in listener.storage.notifier.peers, timeout=60)
    finally:
        await probe.close()
        await flooder.close()
    assert len(listener.storage.notifier._peers) <= postgres_notifier.MAX_PEERS
    assert VISITOR in listener.storage.notifier.peers
    assert listener.woken == 1 + 50000  # each well-formed "work" (the dispatcher coalesces them); no junk
