"""Eager dispatch over a real storage, a real receiver on loopback and the enqueuer: a task an
enqueue leased is delivered without a claim, the slots it took are the dispatcher's, and the
tasks it left ready are claimed as soon as a delivery frees room, not at the next poll (every
dispatcher here polls once a minute, so only a wake-up can deliver within the test)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

import pytest

from tests.storage.helpers import in_queue, new
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET
from workly.clock import SystemClock
from workly.dispatch.deliverer import Deliverer
from workly.dispatch.dispatcher import Dispatcher
from workly.dispatch.http import HttpClient
from workly.errors import StorageUnavailable
from workly.metrics import Metrics
from workly.models import Claim, Enqueued, LeaseOffer, NewTask, QueueConfig
from workly.service.enqueuer import Enqueuer
from workly.signing import Signer
from workly.ssrf_guard import LOOPBACK, OutboundPolicy
from workly.storage.contract import Storage

POLL = 60.0


class Wakes:
    """The enqueuer's on_committed: counts, then wakes the dispatcher as the service does."""

    def __init__(self) -> None:
        self.count = 0
        self.dispatcher: Dispatcher | None = None

    def __call__(self) -> None:
        self.count += 1
        assert self.dispatcher is not None
        self.dispatcher.wake()


@asynccontextmanager
async def eager_enqueuer(
    storage: Storage, metrics: Metrics, *, eager: bool = True, max_in_flight: int = 100
) -> AsyncIterator[tuple[Enqueuer, Wakes]]:
    client = HttpClient(policy=OutboundPolicy(LOOPBACK))
    dispatcher = Dispatcher(
        storage.dispatch, Deliverer(client, Signer([TEST_SECRET]), SystemClock()), SystemClock(),
        poll_interval=POLL, max_in_flight=max_in_flight, metrics=metrics, eager=eager,
    )  # fmt: skip
    wakes = Wakes()
    wakes.dispatcher = dispatcher
    enqueuer = Enqueuer(storage.tasks, SystemClock(), wakes, metrics=metrics, dispatcher=dispatcher)
    dispatcher.start()
    try:
        yield enqueuer, wakes
    finally:
        await enqueuer.drain()
        await dispatcher.stop()
        await client.close()


def sample(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


async def test_a_leased_task_is_delivered_without_a_claim_or_a_wake(storage: Storage) -> None:
    metrics = Metrics()
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10), SystemClock().now())
    async with (
        running_receiver(TEST_SECRET) as receiver,
        eager_enqueuer(storage, metrics) as (enqueuer, wakes),
    ):
        task = new(url=receiver.url("/hook"), body=b"payload")
        [entry] = await enqueuer.enqueue([task])
        [request] = await receiver.wait_for("/hook", 1, timeout=10)
    assert entry.leased is not None and entry.task.status == "ready"
    assert request.verified and request.headers["webhook-id"] == task.id
    assert sample(metrics, "workly_eager_dispatches_total") == 1
    assert sample(metrics, "workly_claim_batch_size_count") == 0  # no claim took anything
    assert wakes.count == 0  # nothing was left for a claim: nobody was woken
    stored = await storage.tasks.get_task(task.id)
    assert stored is not None and (stored.status, stored.attempts) == ("succeeded", 1)


async def test_with_eager_dispatch_off_every_task_waits_for_a_claim(storage: Storage) -> None:
    metrics = Metrics()
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10), SystemClock().now())
    async with (
        running_receiver() as receiver,
        eager_enqueuer(storage, metrics, eager=False) as (enqueuer, wakes),
    ):
        [entry] = await enqueuer.enqueue([new(url=receiver.url("/hook"))])
        await receiver.wait_for("/hook", 1, timeout=10)
    assert entry.leased is None
    assert sample(metrics, "workly_eager_dispatches_total") == 0
    assert sample(metrics, "workly_claim_batch_size_count") == 1
    assert wakes.count == 1


async def test_a_task_left_ready_behind_a_full_queue_goes_when_a_delivery_ends(storage: Storage) -> None:
    metrics = Metrics()
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1), SystemClock().now())
    async with running_receiver() as receiver, eager_enqueuer(storage, metrics) as (enqueuer, _):
        receiver.delay("/slow", 0.3)
        [first] = await enqueuer.enqueue([new(url=receiver.url("/slow"))])
        await receiver.wait_for("/slow", 1, timeout=10)  # the queue's one place is taken
        [second] = await enqueuer.enqueue([new(url=receiver.url("/slow"))])
        await receiver.wait_for("/slow", 2, timeout=10)  # far sooner than the 60 s poll
    assert first.leased is not None and second.leased is None
    assert receiver.peak_in_flight == 1


async def test_offers_never_take_more_slots_than_the_dispatcher_has(storage: Storage) -> None:
    metrics = Metrics()
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), SystemClock().now())
    async with (
        running_receiver() as receiver,
        eager_enqueuer(storage, metrics, max_in_flight=2) as (enqueuer, _),
    ):
        receiver.delay("/slow", 0.1)
        entries = await enqueuer.enqueue([new(url=receiver.url("/slow")) for _ in range(5)])
        await receiver.wait_for("/slow", 5, timeout=10)  # the rest claimed as slots free up
    assert len([e for e in entries if e.leased is not None]) == 2
    assert receiver.peak_in_flight == 2


async def test_an_offer_that_overlaps_a_claim_never_exceeds_the_in_flight_limit(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, gate = asyncio.Event(), asyncio.Event()
    real_claim = storage.dispatch.claim_tasks

    async def held_claim(limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        entered.set()
        await gate.wait()
        return await real_claim(limit, now, lease_token, lease_margin)

    metrics = Metrics()
    for queue in ("claimed", "eager"):
        await storage.queues.put_queue(queue, QueueConfig(max_concurrency=10), SystemClock().now())
    async with running_receiver() as receiver:
        receiver.delay("/slow", 0.2)
        await storage.tasks.enqueue(
            in_queue("claimed", [new(url=receiver.url("/slow")) for _ in range(2)]), SystemClock().now()
        )
        monkeypatch.setattr(storage.dispatch, "claim_tasks", held_claim)
        async with eager_enqueuer(storage, metrics, max_in_flight=2) as (enqueuer, _):
            await asyncio.wait_for(entered.wait(), 10)  # the first claim, sized for both slots, is under way
            entries = await enqueuer.enqueue(
                in_queue("eager", [new(url=receiver.url("/slow")) for _ in range(2)])
            )
            assert all(entry.leased is not None for entry in entries)  # the offer took both slots
            gate.set()  # the claim returns two more tasks: they wait for a slot
            await receiver.wait_for("/slow", 4, timeout=10)
    assert receiver.peak_in_flight == 2


async def test_what_an_enqueue_leased_before_its_error_is_still_delivered(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_enqueue = storage.tasks.enqueue

    async def commits_then_fails(
        tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None = None
    ) -> list[Enqueued]:
        await real_enqueue(tasks, now, offer)
        raise StorageUnavailable("the connection dropped after the commit")

    metrics = Metrics()
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10), SystemClock().now())
    async with running_receiver() as receiver, eager_enqueuer(storage, metrics) as (enqueuer, _):
        monkeypatch.setattr(storage.tasks, "enqueue", commits_then_fails)
        task = new(url=receiver.url("/hook"))
        with pytest.raises(StorageUnavailable):
            await enqueuer.enqueue([task])
        [request] = await receiver.wait_for("/hook", 1, timeout=10)  # not left for the reaper
    assert request.headers["webhook-id"] == task.id
    assert sample(metrics, "workly_eager_dispatches_total") == 1


async def test_a_stop_that_gives_up_starts_none_of_the_tasks_waiting_for_a_slot(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tasks a claim took while an offer held every slot wait for one (the test above). A stop
    that stops waiting (a second Ctrl-C, or the grace over) cancels the deliveries in flight:
    the slots they free must not start those tasks, which would go out after the stop, with no
    HTTP client or storage left to record them. They keep their leases, for the reaper."""
    entered, gate = asyncio.Event(), asyncio.Event()
    real_claim = storage.dispatch.claim_tasks

    async def held_claim(limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        entered.set()
        await gate.wait()
        return await real_claim(limit, now, lease_token, lease_margin)

    metrics = Metrics()
    for queue in ("claimed", "eager"):
        await storage.queues.put_queue(queue, QueueConfig(max_concurrency=10), SystemClock().now())
    async with running_receiver() as receiver:
        receiver.hold("/held")
        waiting = in_queue("claimed", [new(url=receiver.url("/waiting")) for _ in range(2)])
        await storage.tasks.enqueue(waiting, SystemClock().now())
        monkeypatch.setattr(storage.dispatch, "claim_tasks", held_claim)
        try:
            async with eager_enqueuer(storage, metrics, max_in_flight=2) as (enqueuer, wakes):
                await asyncio.wait_for(entered.wait(), 10)
                await enqueuer.enqueue(in_queue("eager", [new(url=receiver.url("/held")) for _ in range(2)]))
                await receiver.wait_for("/held", 2, timeout=10)  # both slots taken
                gate.set()  # the claim returns the two waiting tasks
                assert wakes.dispatcher is not None
                wakes.dispatcher.abandon()  # the stop on the way out gives up at once
            in_flight_after_the_stop = sample(metrics, "workly_deliveries_in_flight")
        finally:
            receiver.release("/held")
        stored = [await storage.tasks.get_task(task.id) for task in waiting]
    assert in_flight_after_the_stop == 0
    # Claimed (the attempt counts from the claim) and leased, never sent: the reaper's to return.
    assert [(task.status, task.attempts) for task in stored if task is not None] == [("running", 1)] * 2
    assert receiver.at("/waiting") == []
