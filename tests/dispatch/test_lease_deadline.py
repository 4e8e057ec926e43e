"""A process that stops (SIGSTOP, a stalled machine) holding claimed tasks must not send them
once their leases may have run out: the reaper of another process has given them back, and
another process may be delivering them, or the next task of their ordering key, meanwhile.

Two dispatchers share one real storage, as two processes share a database. "A" runs on a
virtual clock of its own that stands still while it is stopped (its timers, its heartbeat
among them, fire no more than a stopped process's would), and is held at the step it stopped
in; "B" and the reaper run on the world's virtual clock. The receiver (real, on loopback)
shows what reached it. No test here sleeps: time moves when a clock is advanced.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from tests.dispatch.test_dispatcher import LOCAL, wait_for_status, wait_until
from tests.storage.helpers import new
from tests.support.clock import VirtualClock
from tests.support.receiver import Receiver, running_receiver
from tests.support.servers import TEST_SECRET
from workly.breaker import BreakerRules
from workly.dispatch.deliverer import Deliverer
from workly.dispatch.dispatcher import Dispatcher
from workly.dispatch.http import HttpClient, Resolver
from workly.metrics import Metrics
from workly.models import (
    AttemptResult,
    Claim,
    ClaimedTask,
    Enqueued,
    LeaseOffer,
    NewTask,
    QueueConfig,
    RecordSummary,
)
from workly.service.enqueuer import Enqueuer
from workly.signing import Signer
from workly.storage.contract import DispatchStore, Storage, TaskStore

MARGIN = 6.0  # the soak's WORKLY_LEASE_MARGIN: heartbeats every 2 s
TIMEOUT = 5.0  # a keyed task's attempt timeout: its lease is 11 s
PAUSE = 20.0  # longer than that lease, as the chaos run's 10 s stop was longer than its 8 s leases
HOST = "receiver.test"  # resolved by each process's own resolver (A's may stall)


class PausedAfterClaim:
    """A real storage's dispatch role whose first claim that takes tasks answers only once
    ``resume`` is set: the process stopped right after its claim committed, before it started
    the deliveries."""

    def __init__(self, store: DispatchStore) -> None:
        self._store = store
        self.claimed = asyncio.Event()
        self.resume = asyncio.Event()
        self.returned = False

    async def claim_tasks(self, limit: int, now: datetime, lease_token: str, lease_margin: float) -> Claim:
        claim = await self._store.claim_tasks(limit, now, lease_token, lease_margin)
        if claim.tasks and not self.claimed.is_set():
            self.claimed.set()
            await self.resume.wait()
            self.returned = True  # the dispatcher starts the deliveries before it next yields
        return claim

    async def record_results(
        self, results: Sequence[AttemptResult], now: datetime, rules: BreakerRules = BreakerRules()
    ) -> RecordSummary:
        return await self._store.record_results(results, now, rules)

    async def extend_leases(
        self, leases: Sequence[tuple[int, str]], now: datetime, lease_margin: float
    ) -> set[tuple[int, str]]:
        return await self._store.extend_leases(leases, now, lease_margin)

    async def extend_lease(self, seq: int, lease_token: str, now: datetime, lease_margin: float) -> bool:
        return await self._store.extend_lease(seq, lease_token, now, lease_margin)


class UnansweredExtension(PausedAfterClaim):
    """As PausedAfterClaim, and once ``hang`` is set, the extension of a lapsed lease gets no
    answer until ``answer`` is set: a pool that hands out no connection."""

    def __init__(self, store: DispatchStore) -> None:
        super().__init__(store)
        self.hang = False
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def extend_lease(self, seq: int, lease_token: str, now: datetime, lease_margin: float) -> bool:
        if self.hang:
            self.asked.set()
            await self.answer.wait()
        return await super().extend_lease(seq, lease_token, now, lease_margin)


class PausedInEnqueue:
    """What the enqueuer uses of a real storage's task role, whose enqueues answer only once
    ``resume`` is set: the process stopped while its enqueue's transaction (which leased the
    new task to it) committed."""

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self.entered = asyncio.Event()
        self.resume = asyncio.Event()

    async def enqueue(
        self, tasks: Sequence[NewTask], now: datetime, offer: LeaseOffer | None = None
    ) -> list[Enqueued]:
        stored = await self._store.enqueue(tasks, now, offer)
        self.entered.set()
        await self.resume.wait()
        return stored

    async def leased_tasks(self, ids: Sequence[str], lease_token: str) -> list[ClaimedTask]:
        return await self._store.leased_tasks(ids, lease_token)


class StalledResolver:
    """Resolves every name to 127.0.0.1; while ``stalled``, each lookup first waits for
    ``resume``: the process stopped while connecting, before it wrote the request."""

    def __init__(self, stalled: bool) -> None:
        self.stalled = stalled
        self.waiting = 0
        self.resume = asyncio.Event()

    async def __call__(self, host: str, port: int) -> list[str]:
        if self.stalled:
            self.waiting += 1
            await self.resume.wait()
        return ["127.0.0.1"]


@asynccontextmanager
async def dispatcher_on(
    store: DispatchStore,
    clock: VirtualClock,
    resolver: Resolver,
    metrics: Metrics | None = None,
) -> AsyncIterator[Dispatcher]:
    """A dispatcher as ``workly serve`` runs one, on ``clock``, polling once a minute of it."""
    client = HttpClient(policy=LOCAL, resolver=resolver)
    dispatcher = Dispatcher(
        store,
        Deliverer(client, Signer([TEST_SECRET]), clock),
        clock,
        poll_interval=60,
        lease_margin=MARGIN,
        metrics=metrics,
    )
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        await dispatcher.stop()
        await client.close()


@asynccontextmanager
async def key_receiver() -> AsyncIterator[Receiver]:
    """The receiver, holding the second task of the key until told (or the test ends)."""
    async with running_receiver() as receiver:  # no signatures checked: virtual timestamps
        receiver.hold("/k/1")
        try:
            yield receiver
        finally:
            receiver.release("/k/1")  # a failed test would wait for the held request otherwise


def url(receiver: Receiver, path: str) -> str:
    return receiver.url(path).replace("127.0.0.1", HOST)


async def keyed_pair(storage: Storage, receiver: Receiver, clock: VirtualClock) -> tuple[NewTask, NewTask]:
    """Two tasks of one ordering key: the first answered at once, the second held."""
    await storage.queues.put_queue("keyed", QueueConfig(ordering="key", max_concurrency=10), clock.now())
    first, second = (
        new(queue="keyed", key="k", url=url(receiver, f"/k/{n}"), timeout=TIMEOUT) for n in range(2)
    )
    await storage.tasks.enqueue([first, second], clock.now())
    return first, second


async def while_a_is_stopped(storage: Storage, world: VirtualClock) -> None:
    """The world moves on past the first task's lease, and its reaper takes the task back
    (then B delivers it and starts on the second, which the receiver holds)."""
    world.advance(PAUSE)
    assert await storage.upkeep.reap_expired(world.now()) == 1


def lapsed(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("workly_leases_lapsed_total") or 0.0


def sent_once_while_held(receiver: Receiver) -> None:
    """The first task of the key reached the receiver once (B's), and never while the second
    was in flight there."""
    firsts = receiver.at("/k/0")
    assert receiver.in_flight_at["/k/1"] == 1  # B's delivery of the second is still held
    assert len(firsts) == 1, (
        f"the first task of key k reached the receiver {len(firsts)} times, the last while the "
        "second was in flight there: a stopped process sent it after its lease ran out"
    )


async def no_stale_attempt(storage: Storage, receiver: Receiver, first: NewTask, second: NewTask) -> None:
    receiver.release("/k/1")
    await wait_for_status(storage, second.id, "succeeded")
    attempts = await storage.tasks.list_attempts(first.id)
    # A's attempt 1 is the reaper's "lease expired"; B's attempt 2 delivered it. A sent
    # nothing, so it has no result to be refused (it would be kept as a stale attempt).
    assert [(a.attempt, a.status_code, a.stale) for a in attempts] == [(1, None, False), (2, 204, False)]


async def test_a_task_claimed_before_a_stop_is_not_sent_after_its_lease_ran_out(storage: Storage) -> None:
    world, clock_a, metrics = VirtualClock(), VirtualClock(), Metrics()
    paused = PausedAfterClaim(storage.dispatch)
    async with key_receiver() as receiver:
        first, second = await keyed_pair(storage, receiver, world)
        async with dispatcher_on(paused, clock_a, StalledResolver(stalled=False), metrics) as a:
            await asyncio.wait_for(paused.claimed.wait(), 10)  # A claimed the first, and stops
            await while_a_is_stopped(storage, world)
            async with dispatcher_on(storage.dispatch, world, StalledResolver(stalled=False)):
                await receiver.wait_for("/k/1", 1)
                clock_a.advance(PAUSE)  # A continues, 20 s later by its own clock
                paused.resume.set()
                await wait_until(lambda: paused.returned and not a._in_flight)
                sent_once_while_held(receiver)
                assert lapsed(metrics) == 1
                await no_stale_attempt(storage, receiver, first, second)


async def test_a_request_is_not_written_once_the_lease_ran_out_while_connecting(storage: Storage) -> None:
    world, clock_a, metrics = VirtualClock(), VirtualClock(), Metrics()
    stalled = StalledResolver(stalled=True)
    async with key_receiver() as receiver:
        first, second = await keyed_pair(storage, receiver, world)
        # A task of another queue with a longer lease (30 s + 6 s): it outlives A's stop, and
        # A's heartbeat renews it when A continues, so it is still A's to send.
        other = new(url=url(receiver, "/other"), timeout=30)
        await storage.tasks.enqueue([other], world.now())
        async with dispatcher_on(storage.dispatch, clock_a, stalled, metrics) as a:
            await wait_until(lambda: stalled.waiting == 2)  # A connects for both, and stops
            await while_a_is_stopped(storage, world)
            async with dispatcher_on(storage.dispatch, world, StalledResolver(stalled=False)):
                await receiver.wait_for("/k/1", 1)
                beats = a.heartbeats
                clock_a.advance(PAUSE)  # A continues: its heartbeat, overdue, runs first
                await wait_until(lambda: a.heartbeats > beats)
                stalled.resume.set()
                await receiver.wait_for("/other", 1)
                await wait_until(lambda: not a._in_flight)
                sent_once_while_held(receiver)
                assert lapsed(metrics) == 1  # the first task of the key; the other one was sent
                assert (await wait_for_status(storage, other.id, "succeeded")).attempts == 1
                await no_stale_attempt(storage, receiver, first, second)


async def test_a_task_leased_by_an_enqueue_that_outlived_the_lease_is_not_sent(storage: Storage) -> None:
    clock, metrics = VirtualClock(), Metrics()
    paused = PausedInEnqueue(storage.tasks)
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10), clock.now())
    async with (
        running_receiver() as receiver,
        dispatcher_on(storage.dispatch, clock, StalledResolver(stalled=False), metrics) as dispatcher,
    ):
        enqueuer = Enqueuer(paused, clock, dispatcher.wake, dispatcher=dispatcher)
        task = new(url=url(receiver, "/eager"), timeout=TIMEOUT)
        enqueued = asyncio.create_task(enqueuer.enqueue([task]))
        await asyncio.wait_for(paused.entered.wait(), 10)  # committed, leased to this process
        clock.advance(PAUSE)  # … which stops before it hears so, while another process's reaper
        assert await storage.upkeep.reap_expired(clock.now()) == 1  # takes the task back
        paused.resume.set()
        [entry] = await enqueued
        assert entry.leased is not None  # eager dispatch took it: no claim in between
        await wait_until(lambda: not dispatcher._in_flight)  # adopted before the enqueue returned
        await enqueuer.drain()
    assert lapsed(metrics) == 1
    attempts = await storage.tasks.list_attempts(task.id)
    assert (attempts[0].attempt, attempts[0].status_code, attempts[0].stale) == (
        1,
        None,
        False,
    )  # the reaper's
    # Nothing went out under the lease the stopped enqueue took (its result would be kept,
    # refused, as a stale attempt); a later claim's may have.
    assert not [a for a in attempts if a.stale]
    assert len(receiver.at("/eager")) == len(attempts) - 1, "sent under a lease that began before the stop"


async def test_a_lease_past_its_deadline_that_the_database_still_holds_is_sent(storage: Storage) -> None:
    """Heartbeats kept from renewing it (a failover, a busy pool) leave a lease past its local
    deadline that nobody took back: the database extends it, and the task goes out."""
    world, clock_a, metrics = VirtualClock(), VirtualClock(), Metrics()
    paused = PausedAfterClaim(storage.dispatch)
    async with key_receiver() as receiver:
        first, _ = await keyed_pair(storage, receiver, world)
        async with dispatcher_on(paused, clock_a, StalledResolver(stalled=False), metrics) as a:
            await asyncio.wait_for(paused.claimed.wait(), 10)
            clock_a.advance(PAUSE)  # past A's deadline; no reaper ran: the task is still A's
            paused.resume.set()
            [request] = await receiver.wait_for("/k/0", 1)
            await wait_until(lambda: paused.returned and not a._in_flight)
    assert lapsed(metrics) == 0
    assert request.headers["webhook-id"] == first.id
    stored = await storage.tasks.get_task(first.id)
    assert stored is not None and stored.attempts == 1


async def test_a_lapsed_lease_is_not_sent_when_the_database_does_not_answer(storage: Storage) -> None:
    """The extension that would let a lapsed lease go out waits one heartbeat interval for the
    database, no longer: then the task is not sent, and comes back through the reaper."""
    world, clock_a, metrics = VirtualClock(), VirtualClock(), Metrics()
    stuck = UnansweredExtension(storage.dispatch)
    async with key_receiver() as receiver:
        await keyed_pair(storage, receiver, world)
        async with dispatcher_on(stuck, clock_a, StalledResolver(stalled=False), metrics) as a:
            await asyncio.wait_for(stuck.claimed.wait(), 10)
            stuck.hang = True
            clock_a.advance(PAUSE)  # past A's deadline
            stuck.resume.set()
            await asyncio.wait_for(stuck.asked.wait(), 10)
            assert a._in_flight and lapsed(metrics) == 0  # still waiting for the answer
            clock_a.advance(MARGIN / 3)
            await wait_until(lambda: stuck.returned and not a._in_flight)
            assert lapsed(metrics) == 1
    assert receiver.at("/k/0") == []
