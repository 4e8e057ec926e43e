"""The dispatcher over a real storage, real aiohttp and a real receiver on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from tests.storage.helpers import new
from tests.support.clock import VirtualClock
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET
from workly.breaker import BreakerRules
from workly.clock import SystemClock
from workly.dispatch.deliverer import Deliverer
from workly.dispatch.dispatcher import Dispatcher
from workly.dispatch.http import HttpClient
from workly.errors import StorageUnavailable
from workly.metrics import Metrics
from workly.models import AttemptResult, Claim, QueueConfig, RecordSummary, Task
from workly.signing import Signer
from workly.ssrf_guard import LOOPBACK, OutboundPolicy
from workly.storage.contract import DispatchStore, Storage

LOCAL = OutboundPolicy(LOOPBACK)  # the receivers here listen on 127.0.0.1


@asynccontextmanager
async def dispatching(
    store: DispatchStore, metrics: Metrics | None = None, **options: Any
) -> AsyncIterator[Dispatcher]:
    client = HttpClient(policy=LOCAL)
    dispatcher = Dispatcher(
        store,
        Deliverer(client, Signer([TEST_SECRET]), SystemClock()),
        SystemClock(),
        metrics=metrics,
        **options,
    )
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        await dispatcher.stop()
        await client.close()


async def wait_until(check: Callable[[], object], timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


async def task_status(storage: Storage, task_id: str) -> Task:
    task = await storage.tasks.get_task(task_id)
    assert task is not None
    return task


async def wait_for_status(storage: Storage, task_id: str, status: str, timeout: float = 10.0) -> Task:
    async def poll() -> Task:
        while (task := await task_status(storage, task_id)).status != status:
            await asyncio.sleep(0.02)
        return task

    return await asyncio.wait_for(poll(), timeout)


async def test_an_enqueue_wakes_the_dispatcher(storage: Storage) -> None:
    metrics = Metrics()
    async with (
        running_receiver(TEST_SECRET) as receiver,
        dispatching(storage.dispatch, metrics, poll_interval=60) as dispatcher,
    ):
        # The loop has claimed nothing, and sleeps on its 60 s poll.
        await wait_until(lambda: metrics.registry.get_sample_value("workly_claim_duration_seconds_count"))
        task = new(url=receiver.url("/hook"), body=b"payload")
        await storage.tasks.enqueue([task], SystemClock().now())
        dispatcher.wake()
        [request] = await receiver.wait_for("/hook", 1, timeout=10)
    assert request.verified and request.body == b"payload"
    assert request.headers["webhook-id"] == task.id


async def test_results_are_recorded_and_retries_happen(storage: Storage) -> None:
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.script("/flaky", [503, 500])
        await storage.queues.put_queue(
            "q", QueueConfig(min_backoff=0.01, max_backoff=0.02), SystemClock().now()
        )
        task = new(url=receiver.url("/flaky"))
        await storage.tasks.enqueue([task], SystemClock().now())
        async with dispatching(storage.dispatch, poll_interval=0.05):
            await receiver.wait_for("/flaky", 3)
            await wait_until(lambda: receiver.in_flight == 0)
        stored = await task_status(storage, task.id)
        attempts = await storage.tasks.list_attempts(task.id)
    assert (stored.status, stored.attempts) == ("succeeded", 3)
    assert [a.status_code for a in attempts] == [503, 500, 204]
    assert len({r.headers["webhook-id"] for r in receiver.at("/flaky")}) == 1


async def test_the_global_in_flight_limit_holds(storage: Storage) -> None:
    async with running_receiver() as receiver:
        receiver.delay("/slow", 0.1)
        await storage.queues.put_queue("q", QueueConfig(max_concurrency=1000), SystemClock().now())
        await storage.tasks.enqueue(
            ([new(url=receiver.url("/slow")) for _ in range(12)]), SystemClock().now()
        )
        async with dispatching(storage.dispatch, max_in_flight=3, poll_interval=0.05):
            await receiver.wait_for("/slow", 12)
    assert receiver.peak_in_flight == 3


async def test_the_queue_concurrency_limit_holds(storage: Storage) -> None:
    async with running_receiver() as receiver:
        receiver.delay("/slow", 0.05)
        await storage.queues.put_queue("q", QueueConfig(max_concurrency=2), SystemClock().now())
        await storage.tasks.enqueue(([new(url=receiver.url("/slow")) for _ in range(8)]), SystemClock().now())
        async with dispatching(storage.dispatch, max_in_flight=50, poll_interval=0.05):
            await receiver.wait_for("/slow", 8)
    assert receiver.peak_in_flight == 2


async def test_connection_errors_become_failed_attempts(storage: Storage) -> None:
    task = new(url="http://127.0.0.1:9/closed", max_attempts=1)  # port 9 (discard): refused
    await storage.tasks.enqueue([task], SystemClock().now())
    async with dispatching(storage.dispatch, poll_interval=0.05):
        await wait_for_status(storage, task.id, "failed")
    [attempt] = await storage.tasks.list_attempts(task.id)
    assert attempt.status_code is None
    assert attempt.error is not None and attempt.error.startswith("connection failed")


async def test_redirects_are_not_followed(storage: Storage) -> None:
    async with running_receiver() as receiver:
        receiver.script("/moved", [302])
        task = new(url=receiver.url("/moved"), max_attempts=1)
        await storage.tasks.enqueue([task], SystemClock().now())
        async with dispatching(storage.dispatch, poll_interval=0.05):
            await receiver.wait_for("/moved", 1)
            stored = await wait_for_status(storage, task.id, "failed")
    assert (stored.status, stored.last_status_code) == ("failed", 302)
    assert len(receiver.requests) == 1


async def test_stop_ends_the_loop_and_health_sees_it(storage: Storage) -> None:
    async with dispatching(storage.dispatch, poll_interval=0.05) as dispatcher:
        await wait_until(lambda: dispatcher.alive(stall_seconds=5))
    assert not dispatcher.alive(stall_seconds=5)


async def test_the_request_goes_out_as_enqueued(storage: Storage) -> None:
    async with running_receiver(TEST_SECRET) as receiver:
        raw = new(url=receiver.url("/raw?x=1"), method="PUT", headers={"X-Custom": "a b"}, body=b"\x00\xff")
        empty = new(url=receiver.url("/empty"), method="GET")
        await storage.tasks.enqueue([raw, empty], SystemClock().now())
        async with dispatching(storage.dispatch, poll_interval=0.05):
            [got_raw] = await receiver.wait_for("/raw", 1)
            [got_empty] = await receiver.wait_for("/empty", 1)
    assert (got_raw.method, got_raw.body, got_raw.headers["X-Custom"]) == ("PUT", b"\x00\xff", "a b")
    assert "Content-Type" not in got_raw.headers  # none was enqueued, none is invented
    assert got_raw.verified
    assert (got_empty.method, got_empty.body) == ("GET", b"")
    assert "Content-Type" not in got_empty.headers
    assert got_empty.headers["User-Agent"].startswith("Workly/")


async def test_the_heartbeat_keeps_a_slow_live_delivery_from_the_reaper(storage: Storage) -> None:
    clock = VirtualClock()
    async with running_receiver() as receiver:
        receiver.hold("/slow")
        task = new(url=receiver.url("/slow"), timeout=20)
        await storage.tasks.enqueue([task], clock.now())
        session = HttpClient(policy=LOCAL)
        dispatcher = Dispatcher(
            storage.dispatch,
            Deliverer(session, Signer([TEST_SECRET]), clock),
            clock,
            poll_interval=60,
            lease_margin=30,  # heartbeats every 10 s
        )
        dispatcher.start()
        try:
            await receiver.wait_for("/slow", 1)
            seen = dispatcher.heartbeats
            # An hour: far past the claim's lease (20 s + 30 s). The heartbeat due within it
            # renews the lease from the hour's end.
            clock.advance(3600)
            await wait_until(lambda: dispatcher.heartbeats > seen)
            assert await storage.upkeep.reap_expired(clock.advance(45)) == 0
            receiver.release("/slow")
            stored = await wait_for_status(storage, task.id, "succeeded")
        finally:
            await dispatcher.stop()
            await session.close()
    assert stored.attempts == 1
    assert len(receiver.at("/slow")) == 1


QUEUE_SECRETS = "whsec_cXVldWUtc2VjcmV0LTAxMjM0NTY3ODk= whsec_b2xkLXF1ZXVlLXNlY3JldC0wMTIz"


async def test_a_queue_with_its_own_secret_is_signed_with_it(storage: Storage) -> None:
    clock = SystemClock()
    await storage.queues.put_queue("own", QueueConfig(signing_secret=QUEUE_SECRETS), clock.now())
    async with running_receiver(QUEUE_SECRETS.split()[0]) as own, running_receiver(TEST_SECRET) as shared:
        await storage.tasks.enqueue(
            [new(queue="own", url=own.url("/own")), new(url=shared.url("/shared"))], clock.now()
        )
        async with dispatching(storage.dispatch, poll_interval=0.05):
            [got_own] = await own.wait_for("/own", 1)
            [got_shared] = await shared.wait_for("/shared", 1)
    assert got_own.verified  # with the queue's current secret ...
    assert len(got_own.headers["webhook-signature"].split()) == 2  # ... and its old one signs too
    assert got_shared.verified  # other queues keep WORKLY_SIGNING_SECRET
    assert len(got_shared.headers["webhook-signature"].split()) == 1


class FlakyResults:
    """The dispatch role of a real storage whose record_results fails ``failures`` times as
    if the database were restarting (``after_commit``: as if the answer were lost after the
    write committed); claims and heartbeats go straight through."""

    def __init__(self, store: DispatchStore, failures: int, after_commit: bool = False) -> None:
        self._store = store
        self.failures = failures
        self.after_commit = after_commit
        self.calls = 0

    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        return await self._store.claim_tasks(limit, now, lease_token, lease_margin)

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        return await self._store.extend_leases(leases, now, lease_margin)

    async def extend_lease(self, seq: int, lease_token: str, now: datetime, lease_margin: float) -> bool:
        return await self._store.extend_lease(seq, lease_token, now, lease_margin)

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        self.calls += 1
        if not self.failures:
            return await self._store.record_results(results, now, rules)
        self.failures -= 1
        if self.after_commit:
            await self._store.record_results(results, now, rules)
            raise StorageUnavailable(
                "PostgreSQL is unavailable: connection was closed in the middle of operation"
            )
        raise StorageUnavailable("PostgreSQL is unavailable: the database system is starting up")


async def test_a_result_the_database_could_not_take_is_recorded_once_it_can(storage: Storage) -> None:
    flaky = FlakyResults(storage.dispatch, failures=3)
    async with running_receiver() as receiver:
        task = new(url=receiver.url("/hook"))
        await storage.tasks.enqueue([task], SystemClock().now())
        async with dispatching(flaky, poll_interval=0.05, lease_margin=3):
            stored = await wait_for_status(storage, task.id, "succeeded")
    assert flaky.calls == 4 and stored.attempts == 1
    assert len(receiver.at("/hook")) == 1  # recorded under its first lease: not sent again


async def test_a_result_written_before_its_answer_was_lost_is_not_written_again(storage: Storage) -> None:
    flaky = FlakyResults(storage.dispatch, failures=1, after_commit=True)
    async with running_receiver() as receiver:
        task = new(url=receiver.url("/hook"))
        await storage.tasks.enqueue([task], SystemClock().now())
        async with dispatching(flaky, poll_interval=0.05, lease_margin=3) as dispatcher:
            stored = await wait_for_status(storage, task.id, "succeeded")
            await wait_until(lambda: not dispatcher._in_flight, timeout=5)
        attempts = await storage.tasks.list_attempts(task.id)
    # The lease was no longer held after the lost answer: the result was not sent again (it
    # would have been kept as a second, stale attempt).
    assert flaky.calls == 1
    assert [(a.attempt, a.stale) for a in attempts] == [(1, False)]
    assert stored.attempts == 1


async def test_a_result_is_given_up_after_the_lease_margin(storage: Storage) -> None:
    flaky = FlakyResults(storage.dispatch, failures=1000)
    async with running_receiver() as receiver:
        task = new(url=receiver.url("/hook"))
        await storage.tasks.enqueue([task], SystemClock().now())
        async with dispatching(flaky, poll_interval=0.05, lease_margin=0.3) as dispatcher:
            await receiver.wait_for("/hook", 1)
            # The delivery ends once the tries spent the margin (waits of 0.05, 0.1, 0.2 s…
            # past 0.3 s from the first failure): its slot is free, the task left to its lease.
            await wait_until(lambda: not dispatcher._in_flight, timeout=5)
    assert 2 <= flaky.calls <= 4  # how many fit in 0.3 s depends on the machine
    assert (await task_status(storage, task.id)).status == "running"
