"""The storage contract, eager dispatch: an enqueue given a LeaseOffer leases the tasks a claim
would take at once to the offering dispatcher, in its own transaction, and only those. Every
test runs on both backends; the ones named "across processes" hold the queue limits between
two handles on the same database.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from tests.storage.helpers import another_process, in_queue, new, result_for, token
from tests.storage.test_conformance_webhooks import ORIGIN, RULES, outcome
from tests.support.clock import VirtualClock
from workly.models import ClaimedTask, Enqueued, LeaseOffer, QueueConfig, Task
from workly.storage.contract import Storage

MARGIN = 30.0


def offer(slots: int = 100) -> LeaseOffer:
    return LeaseOffer(slots, token(), MARGIN, 0.0)


async def claim(storage: Storage, now: datetime, limit: int = 100) -> list[ClaimedTask]:
    return (await storage.dispatch.claim_tasks(limit, now, token(), MARGIN)).tasks


async def stored(storage: Storage, task_id: str) -> Task:
    task = await storage.tasks.get_task(task_id)
    assert task is not None
    return task


def leased_ids(entries: list[Enqueued]) -> list[str]:
    return [entry.leased.id for entry in entries if entry.leased is not None]


async def test_an_offer_leases_due_plain_tasks_as_a_claim_would(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue(
        "q", QueueConfig(max_concurrency=10, timeout=5.0, signing_secret="whsec_abc"), clock.now()
    )
    tasks = [new(body=b"one", headers={"x-n": "1"}), new(body=b"two", max_attempts=4)]
    given = offer()
    entries = await storage.tasks.enqueue(tasks, clock.now(), given)

    assert leased_ids(entries) == [t.id for t in tasks]
    for entry, task in zip(entries, tasks, strict=True):
        # The answer shows the task as accepted; the lease is the dispatcher's.
        assert (entry.created, entry.task.status, entry.task.attempts) == (True, "ready", 0)
        leased = entry.leased
        assert leased is not None
        assert (leased.queue, leased.url, leased.body, leased.headers) == (
            "q",
            task.url,
            task.body,
            task.headers,
        )
        assert (leased.attempt, leased.lease_token, leased.timeout) == (1, given.lease_token, 5.0)
        assert leased.signing_secret == "whsec_abc"
        assert leased.due_at == clock.now()
        now_stored = await stored(storage, task.id)
        assert (now_stored.status, now_stored.attempts) == ("running", 1)
        assert now_stored.lease_expires_at == clock.now() + timedelta(seconds=5.0 + MARGIN)
    assert [entry.leased.max_attempts for entry in entries if entry.leased] == [10, 4]
    assert await claim(storage, clock.now()) == []  # nothing is left for a claim

    summary = await storage.dispatch.record_results(
        [result_for(entry.leased, clock.now(), "succeeded") for entry in entries if entry.leased], clock.now()
    )
    assert (summary.accepted, summary.stale) == (2, 0)
    assert {(await stored(storage, t.id)).status for t in tasks} == {"succeeded"}


async def test_the_offer_bounds_what_is_leased_and_the_rest_waits_for_a_claim(
    storage: Storage, clock: VirtualClock
) -> None:
    for queue in ("a", "b"):
        await storage.queues.put_queue(queue, QueueConfig(max_concurrency=10), clock.now())
    tasks = [*in_queue("a", [new(), new()]), *in_queue("b", [new(), new(priority=5)])]
    entries = await storage.tasks.enqueue(tasks, clock.now(), offer(slots=2))
    # Higher priority first, then enqueue order, as a claim orders them (entries keep input order).
    assert leased_ids(entries) == [tasks[0].id, tasks[3].id]
    assert sorted(c.id for c in await claim(storage, clock.now())) == sorted([tasks[1].id, tasks[2].id])


async def test_what_an_offer_never_leases(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    await storage.queues.put_queue("paused", QueueConfig(paused=True), clock.now())
    await storage.queues.put_queue("limited", QueueConfig(rate_limit=100.0), clock.now())
    [original] = await storage.tasks.enqueue(in_queue("keyed", [new(idempotency_key="once")]), clock.now())
    kept_out = [
        new(run_at=clock.now() + timedelta(seconds=5)),  # not due yet
        new(key="k"),  # an ordering key: its head rule is the claim's
        new(tenant="acme"),  # a tenant: its turn is the claim's
        *in_queue("keyed", [new(idempotency_key="once")]),  # matches a stored task: nothing inserted
        *in_queue("paused", [new()]),
        *in_queue("limited", [new()]),
    ]
    for task in kept_out:  # one at a time: each alone in its queue but for what it waits behind
        [entry] = await storage.tasks.enqueue([task], clock.now(), offer())
        assert entry.leased is None, task
        assert (await stored(storage, entry.task.id)).status == "ready"
        if task.queue == "q":
            await storage.queues.purge_queue("q")
        if task.queue == "keyed":
            assert (entry.created, entry.task.id) == (False, original.task.id)


async def test_a_queue_holding_another_ready_task_leases_nothing(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    [later] = await storage.tasks.enqueue([new(run_at=clock.now() + timedelta(seconds=60))], clock.now())
    [behind] = await storage.tasks.enqueue([new()], clock.now(), offer())
    assert behind.leased is None  # the claim decides what goes first
    await storage.tasks.cancel_task(later.task.id, clock.now())
    await storage.tasks.cancel_task(behind.task.id, clock.now())
    [alone] = await storage.tasks.enqueue([new()], clock.now(), offer())
    assert alone.leased is not None


async def test_a_task_whose_breaker_is_open_is_held_not_leased(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("plain", QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue(in_queue("plain", [new(breaker=ORIGIN) for _ in range(3)]), clock.now())
    failed = await claim(storage, clock.now())
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in failed], clock.now(), RULES
    )
    [held] = await storage.tasks.enqueue(in_queue("other", [new(breaker=ORIGIN)]), clock.now(), offer())
    assert held.leased is None
    assert (await stored(storage, held.task.id)).run_at.year == 2030  # held until the breaker closes


async def test_a_queue_leases_only_its_room_under_max_concurrency(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=3), clock.now())
    await storage.tasks.enqueue([new()], clock.now())
    [running] = await claim(storage, clock.now())
    tasks = [new(), new(priority=1), new()]
    entries = await storage.tasks.enqueue(tasks, clock.now(), offer())
    assert leased_ids(entries) == [tasks[0].id, tasks[1].id]  # two places were free: not the last
    assert await claim(storage, clock.now()) == []  # three run: the third waits
    await storage.dispatch.record_results([result_for(running, clock.now(), "succeeded")], clock.now())
    assert [c.id for c in await claim(storage, clock.now())] == [tasks[2].id]


async def test_the_room_a_result_frees_is_leased_again(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1), clock.now())
    for _ in range(3):  # the result's release is counted in, with no claim in between
        [entry] = await storage.tasks.enqueue([new()], clock.now(), offer())
        assert entry.leased is not None
        await storage.dispatch.record_results(
            [result_for(entry.leased, clock.now(), "succeeded")], clock.now()
        )


async def test_what_an_enqueue_leased_can_be_found_by_its_lease(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue(
        "q", QueueConfig(max_concurrency=10, signing_secret="whsec_abc"), clock.now()
    )
    tasks = [new(), new(run_at=clock.now() + timedelta(seconds=5))]
    given = offer()
    entries = await storage.tasks.enqueue(tasks, clock.now(), given)
    ids = [t.id for t in tasks]
    found = await storage.tasks.leased_tasks(ids, given.lease_token)
    assert found == [entries[0].leased]
    assert await storage.tasks.leased_tasks(ids, token()) == []


async def test_leased_tasks_count_under_max_concurrency_across_processes(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=2), clock.now())
    entries = await storage.tasks.enqueue([new(), new()], clock.now(), offer())
    leased = [entry.leased for entry in entries if entry.leased is not None]
    assert len(leased) == 2
    other = await another_process(storage, database_url)
    try:
        waiting = new()
        [left] = await other.tasks.enqueue([waiting], clock.now(), offer())
        assert left.leased is None  # no room left under max_concurrency
        assert await claim(other, clock.now()) == []
        await storage.dispatch.record_results([result_for(leased[0], clock.now(), "succeeded")], clock.now())
        assert [c.id for c in await claim(other, clock.now())] == [waiting.id]
    finally:
        await other.close()


async def test_a_leased_task_whose_lease_expires_is_reaped_and_redelivered(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=5, timeout=5.0), clock.now())
    [entry] = await storage.tasks.enqueue([new()], clock.now(), offer())
    assert entry.leased is not None
    assert await storage.upkeep.reap_expired(clock.advance(5.0 + MARGIN + 1)) == 1
    [again] = await claim(storage, clock.now())
    assert (again.id, again.attempt) == (entry.task.id, 2)
    summary = await storage.dispatch.record_results(
        [result_for(entry.leased, clock.now(), "succeeded")], clock.now()
    )
    assert summary.stale == 1  # the first lease was taken over: its result is refused


async def test_racing_eager_enqueues_and_claims_never_exceed_max_concurrency_across_processes(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=3), clock.now())
    other = await another_process(storage, database_url)
    try:
        for _ in range(5):  # each round: eager enqueues and claims race for the three places
            handles = (storage, other) * 2
            enqueues = asyncio.gather(
                *(s.tasks.enqueue([new(), new()], clock.now(), offer()) for s in handles)
            )
            claims = asyncio.gather(*(claim(s, clock.now(), limit=3) for s in (storage, other)))
            stored, claimed = await asyncio.gather(enqueues, claims)
            leased = [e.leased for entries in stored for e in entries if e.leased is not None]
            running = [*leased, *(c for batch in claimed for c in batch)]
            assert len(running) <= 3
            running += await claim(storage, clock.now())  # whatever was left ready fills the rest
            assert len(running) == 3
            await storage.dispatch.record_results(
                [result_for(t, clock.now(), "succeeded") for t in running], clock.now()
            )
            await storage.queues.purge_queue("q")  # the next round starts with nothing waiting
    finally:
        await other.close()
