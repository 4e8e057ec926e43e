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
from tests.support.clock import FakeClock
from workly.models import ClaimedTask, Enqueued, LeaseOffer, QueueConfig, Task
from workly.storage.base import Storage

MARGIN = 30.0


def offer(slots: int = 100) -> LeaseOffer:
    return LeaseOffer(slots, token(), MARGIN)


async def claim(storage: Storage, now: datetime, limit: int = 100) -> list[ClaimedTask]:
    return (await storage.claim_tasks(limit, now, token(), MARGIN)).tasks


async def stored(storage: Storage, task_id: str) -> Task:
    task = await storage.get_task(task_id)
    assert task is not None
    return task


def leased_ids(entries: list[Enqueued]) -> list[str]:
    return [entry.leased.id for entry in entries if entry.leased is not None]


async def test_an_offer_leases_due_plain_tasks_as_a_claim_would(storage: Storage, clock: FakeClock) -> None:
    await storage.put_queue(
        "q", QueueConfig(max_concurrency=10, timeout=5.0, signing_secret="whsec_abc"), clock()
    )
    tasks = [new(body=b"one", headers={"x-n": "1"}), new(body=b"two", max_attempts=4)]
    given = offer()
    entries = await storage.enqueue(tasks, clock(), given)

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
        assert leased.due_at == clock()
        now_stored = await stored(storage, task.id)
        assert (now_stored.status, now_stored.attempts) == ("running", 1)
        assert now_stored.lease_expires_at == clock() + timedelta(seconds=5.0 + MARGIN)
    assert [entry.leased.max_attempts for entry in entries if entry.leased] == [10, 4]
    assert await claim(storage, clock()) == []  # nothing is left for a claim

    summary = await storage.record_results(
        [result_for(entry.leased, clock(), "succeeded") for entry in entries if entry.leased], clock()
    )
    assert (summary.accepted, summary.stale) == (2, 0)
    assert {(await stored(storage, t.id)).status for t in tasks} == {"succeeded"}


async def test_the_offer_bounds_what_is_leased_and_the_rest_waits_for_a_claim(
    storage: Storage, clock: FakeClock
) -> None:
    for queue in ("a", "b"):
        await storage.put_queue(queue, QueueConfig(max_concurrency=10), clock())
    tasks = [*in_queue("a", [new(), new()]), *in_queue("b", [new(), new(priority=5)])]
    entries = await storage.enqueue(tasks, clock(), offer(slots=2))
    # Higher priority first, then enqueue order, as a claim orders them (entries keep input order).
    assert leased_ids(entries) == [tasks[0].id, tasks[3].id]
    assert sorted(c.id for c in await claim(storage, clock())) == sorted([tasks[1].id, tasks[2].id])


async def test_what_an_offer_never_leases(storage: Storage, clock: FakeClock) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=100), clock())
    await storage.put_queue("paused", QueueConfig(paused=True), clock())
    await storage.put_queue("limited", QueueConfig(rate_limit=100.0), clock())
    [original] = await storage.enqueue(in_queue("keyed", [new(idempotency_key="once")]), clock())
    kept_out = [
        new(run_at=clock() + timedelta(seconds=5)),  # not due yet
        new(key="k"),  # an ordering key: its head rule is the claim's
        new(tenant="acme"),  # a tenant: its turn is the claim's
        *in_queue("keyed", [new(idempotency_key="once")]),  # matches a stored task: nothing inserted
        *in_queue("paused", [new()]),
        *in_queue("limited", [new()]),
    ]
    for task in kept_out:  # one at a time: each alone in its queue but for what it waits behind
        [entry] = await storage.enqueue([task], clock(), offer())
        assert entry.leased is None, task
        assert (await stored(storage, entry.task.id)).status == "ready"
        if task.queue == "q":
            await storage.purge_queue("q")
        if task.queue == "keyed":
            assert (entry.created, entry.task.id) == (False, original.task.id)


async def test_a_queue_holding_another_ready_task_leases_nothing(storage: Storage, clock: FakeClock) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=100), clock())
    [later] = await storage.enqueue([new(run_at=clock() + timedelta(seconds=60))], clock())
    [behind] = await storage.enqueue([new()], clock(), offer())
    assert behind.leased is None  # the claim decides what goes first
    await storage.cancel_task(later.task.id, clock())
    await storage.cancel_task(behind.task.id, clock())
    [alone] = await storage.enqueue([new()], clock(), offer())
    assert alone.leased is not None


async def test_a_task_whose_breaker_is_open_is_held_not_leased(storage: Storage, clock: FakeClock) -> None:
    await storage.put_queue("plain", QueueConfig(max_concurrency=100), clock())
    await storage.enqueue(in_queue("plain", [new(breaker=ORIGIN) for _ in range(3)]), clock())
    failed = await claim(storage, clock())
    await storage.record_results([outcome(c, clock(), "fail") for c in failed], clock(), RULES)
    [held] = await storage.enqueue(in_queue("other", [new(breaker=ORIGIN)]), clock(), offer())
    assert held.leased is None
    assert (await stored(storage, held.task.id)).run_at.year == 2030  # held until the breaker closes


async def test_a_queue_leases_only_its_room_under_max_concurrency(storage: Storage, clock: FakeClock) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=3), clock())
    await storage.enqueue([new()], clock())
    [running] = await claim(storage, clock())
    tasks = [new(), new(priority=1), new()]
    entries = await storage.enqueue(tasks, clock(), offer())
    assert leased_ids(entries) == [tasks[0].id, tasks[1].id]  # two places were free: not the last
    assert await claim(storage, clock()) == []  # three run: the third waits
    await storage.record_results([result_for(running, clock(), "succeeded")], clock())
    assert [c.id for c in await claim(storage, clock())] == [tasks[2].id]


async def test_the_room_a_result_frees_is_leased_again(storage: Storage, clock: FakeClock) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=1), clock())
    for _ in range(3):  # the result's release is counted in, with no claim in between
        [entry] = await storage.enqueue([new()], clock(), offer())
        assert entry.leased is not None
        await storage.record_results([result_for(entry.leased, clock(), "succeeded")], clock())


async def test_what_an_enqueue_leased_can_be_found_by_its_lease(storage: Storage, clock: FakeClock) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=10, signing_secret="whsec_abc"), clock())
    tasks = [new(), new(run_at=clock() + timedelta(seconds=5))]
    given = offer()
    entries = await storage.enqueue(tasks, clock(), given)
    ids = [t.id for t in tasks]
    found = await storage.leased_tasks(ids, given.lease_token)
    assert found == [entries[0].leased]
    assert await storage.leased_tasks(ids, token()) == []


async def test_leased_tasks_count_under_max_concurrency_across_processes(
    storage: Storage, database_url: str, clock: FakeClock
) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=2), clock())
    entries = await storage.enqueue([new(), new()], clock(), offer())
    leased = [entry.leased for entry in entries if entry.leased is not None]
    assert len(leased) == 2
    other = await another_process(storage, database_url)
    try:
        waiting = new()
        [left] = await other.enqueue([waiting], clock(), offer())
        assert left.leased is None  # no room left under max_concurrency
        assert await claim(other, clock()) == []
        await storage.record_results([result_for(leased[0], clock(), "succeeded")], clock())
        assert [c.id for c in await claim(other, clock())] == [waiting.id]
    finally:
        await other.close()


async def test_a_leased_task_whose_lease_expires_is_reaped_and_redelivered(
    storage: Storage, clock: FakeClock
) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=5, timeout=5.0), clock())
    [entry] = await storage.enqueue([new()], clock(), offer())
    assert entry.leased is not None
    assert await storage.reap_expired(clock.advance(5.0 + MARGIN + 1)) == 1
    [again] = await claim(storage, clock())
    assert (again.id, again.attempt) == (entry.task.id, 2)
    summary = await storage.record_results([result_for(entry.leased, clock(), "succeeded")], clock())
    assert summary.stale == 1  # the first lease was taken over: its result is refused


async def test_racing_eager_enqueues_and_claims_never_exceed_max_concurrency_across_processes(
    storage: Storage, database_url: str, clock: FakeClock
) -> None:
    await storage.put_queue("q", QueueConfig(max_concurrency=3), clock())
    other = await another_process(storage, database_url)
    try:
        for _ in range(5):  # each round: eager enqueues and claims race for the three places
            handles = (storage, other) * 2
            enqueues = asyncio.gather(*(s.enqueue([new(), new()], clock(), offer()) for s in handles))
            claims = asyncio.gather(*(claim(s, clock(), limit=3) for s in (storage, other)))
            stored, claimed = await asyncio.gather(enqueues, claims)
            leased = [e.leased for entries in stored for e in entries if e.leased is not None]
            running = [*leased, *(c for batch in claimed for c in batch)]
            assert len(running) <= 3
            running += await claim(storage, clock())  # whatever was left ready fills the rest
            assert len(running) == 3
            await storage.record_results([result_for(t, clock(), "succeeded") for t in running], clock())
            await storage.purge_queue("q")  # the next round starts with nothing waiting
    finally:
        await other.close()
