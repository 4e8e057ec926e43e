"""The storage contract, queue controls: concurrency, rate limits, ordering keys, tenant
fairness, priority and pause. Every test runs on both backends; the ones named "across
processes" open a second handle on the same database (on PostgreSQL its own pool, as
another `workly serve` process has) and hold the rule between the two.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import pytest

from tests.storage.helpers import another_process, changing, in_queue, new, result_for, token
from tests.support.clock import VirtualClock
from workly.models import ClaimedTask, QueueConfig
from workly.storage.contract import Storage

MARGIN = 30.0


async def claim(storage: Storage, now: datetime, limit: int = 100) -> list[ClaimedTask]:
    return (await storage.dispatch.claim_tasks(limit, now, token(), MARGIN)).tasks


async def succeed(storage: Storage, now: datetime, claimed: list[ClaimedTask]) -> None:
    await storage.dispatch.record_results([result_for(c, now, "succeeded") for c in claimed], now)


# --- max_concurrency -----------------------------------------------------------------


async def test_max_concurrency_holds_across_processes(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=2), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(5)]), clock.now())
    other = await another_process(storage, database_url)
    try:
        first = await claim(storage, clock.now())
        assert len(first) == 2
        assert await claim(other, clock.now()) == []
        await succeed(storage, clock.now(), first[:1])  # one slot comes free ...
        assert len(await claim(other, clock.now())) == 1  # ... for whichever process claims next
        assert await claim(storage, clock.now()) == []
    finally:
        await other.close()


async def test_concurrent_claims_never_exceed_max_concurrency(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=5), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(100)]), clock.now())
    other = await another_process(storage, database_url)
    try:
        for _ in range(10):  # each round: eight claims race for the five slots
            batches = await asyncio.gather(*(claim(c, clock.now(), limit=3) for c in [storage, other] * 4))
            claimed = [c for batch in batches for c in batch]
            assert len(claimed) == 5
            await succeed(storage, clock.now(), claimed)
    finally:
        await other.close()


async def test_reaped_and_failed_deliveries_free_their_slots(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=2, max_attempts=1), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(6)]), clock.now())
    first = await claim(storage, clock.now())
    await storage.dispatch.record_results([result_for(first[0], clock.now(), "failed", 500)], clock.now())
    assert len(await claim(storage, clock.now())) == 1  # the failed one freed its slot
    assert await storage.upkeep.reap_expired(clock.advance(30 + MARGIN + 1)) == 2  # both still running
    assert len(await claim(storage, clock.now())) == 2


async def test_lowering_max_concurrency_waits_for_deliveries_in_flight(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=3), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(6)]), clock.now())
    running = await claim(storage, clock.now())
    await storage.queues.update_queue("q", changing(max_concurrency=1), clock.now())
    await succeed(storage, clock.now(), running[:2])
    assert await claim(storage, clock.now()) == []  # one still runs: that is the new limit
    await succeed(storage, clock.now(), running[2:])
    assert len(await claim(storage, clock.now())) == 1


async def test_a_recreated_queue_starts_with_no_deliveries_in_flight(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [orphan] = await claim(storage, clock.now())
    await storage.queues.delete_queue("q")
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new(), new()]), clock.now())
    await succeed(storage, clock.now(), [orphan])  # its task is gone: it releases nothing
    assert len(await claim(storage, clock.now())) == 1
    assert await claim(storage, clock.now()) == []


# --- rate_limit ------------------------------------------------------------------------


async def test_rate_limit_spends_tokens_and_says_when_the_next_one_comes(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100, rate_limit=10), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(10)]), clock.now())
    first = await storage.dispatch.claim_tasks(100, clock.now(), token(), MARGIN)
    assert len(first.tasks) == 1  # the burst of a 10/s queue is one
    assert first.rate_wait == pytest.approx(0.1)
    empty = await storage.dispatch.claim_tasks(100, clock.advance(0.04), token(), MARGIN)
    assert empty.tasks == []
    assert empty.rate_wait == pytest.approx(0.06)
    assert len(await claim(storage, clock.advance(0.06))) == 1
    assert len(await claim(storage, clock.advance(5))) == 1  # idle time does not pile up


async def test_rate_limit_burst_is_a_tenth_of_a_second(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100, rate_limit=100), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(50)]), clock.now())
    assert len(await claim(storage, clock.now())) == 10
    assert len(await claim(storage, clock.advance(0.05))) == 5
    assert len(await claim(storage, clock.advance(60))) == 10


async def test_rate_limit_holds_across_processes(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100, rate_limit=20), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(20)]), clock.now())
    other = await another_process(storage, database_url)
    try:
        assert len(await claim(storage, clock.now())) == 2
        assert await claim(other, clock.now()) == []
        assert len(await claim(other, clock.advance(0.05))) == 1
        assert await claim(storage, clock.now()) == []
    finally:
        await other.close()


async def test_an_unlimited_queue_has_no_rate_wait(storage: Storage, clock: VirtualClock) -> None:
    await storage.tasks.enqueue([new()], clock.now())
    assert (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).rate_wait is None


# --- ordering: key ---------------------------------------------------------------------


async def test_a_key_runs_one_task_at_a_time_in_enqueue_order(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100, ordering="key"), clock.now())
    a1, a2, b1, a3, free = new(key="a"), new(key="a"), new(key="b"), new(key="a"), new()
    await storage.tasks.enqueue([a1, a2, b1, a3, free], clock.now())
    first = await claim(storage, clock.now())
    assert {c.id for c in first} == {a1.id, b1.id, free.id}
    assert await claim(storage, clock.now()) == []
    await succeed(storage, clock.now(), first)
    assert [c.id for c in await claim(storage, clock.now())] == [a2.id]


async def test_a_key_waits_for_its_head_to_be_retried(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100, ordering="key"), clock.now())
    head, behind = new(key="a"), new(key="a")
    await storage.tasks.enqueue([head, behind], clock.now())
    [first] = await claim(storage, clock.now())
    await storage.dispatch.record_results(
        [result_for(first, clock.now(), "retry", 503, retry_in=10)], clock.now()
    )
    assert await claim(storage, clock.advance(9)) == []  # the head waits: so does the key
    [again] = await claim(storage, clock.advance(1))
    assert again.id == head.id
    await succeed(storage, clock.now(), [again])
    assert [c.id for c in await claim(storage, clock.now())] == [behind.id]


@pytest.mark.parametrize("ending", ["failed", "canceled", "reaped past its last attempt"])
async def test_a_head_that_ends_for_good_lets_its_key_go_on(
    storage: Storage, clock: VirtualClock, ending: str
) -> None:
    await storage.queues.put_queue(
        "q", QueueConfig(max_concurrency=100, ordering="key", max_attempts=1), clock.now()
    )
    head, behind = new(key="a"), new(key="a")
    await storage.tasks.enqueue([head, behind], clock.now())
    if ending == "canceled":
        await storage.tasks.cancel_task(head.id, clock.now())
    else:
        [first] = await claim(storage, clock.now())
        if ending == "failed":
            await storage.dispatch.record_results(
                [result_for(first, clock.now(), "failed", 400)], clock.now()
            )
        else:
            assert await storage.upkeep.reap_expired(clock.advance(30 + MARGIN + 1)) == 1
    assert [c.id for c in await claim(storage, clock.now())] == [behind.id]


async def test_keys_do_not_order_a_queue_without_ordering(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue([new(key="a") for _ in range(3)], clock.now())
    assert len(await claim(storage, clock.now())) == 3


async def test_keys_stay_ordered_across_concurrent_processes(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1000, ordering="key"), clock.now())
    tasks = [new(key=f"k{i % 7}") for i in range(70)]
    await storage.tasks.enqueue(tasks, clock.now())
    expected: dict[str, list[str]] = defaultdict(list)
    for task in tasks:
        expected[task.key or ""].append(task.id)
    order: dict[str, list[str]] = defaultdict(list)
    key_of = {t.id: t.key for t in tasks}
    other = await another_process(storage, database_url)
    try:
        while sum(len(v) for v in order.values()) < len(tasks):
            batches = await asyncio.gather(*(claim(c, clock.now(), limit=3) for c in [storage, other] * 3))
            claimed = [c for batch in batches for c in batch]
            in_flight = Counter(key_of[c.id] for c in claimed)
            assert max(in_flight.values(), default=0) <= 1, in_flight
            for c in claimed:
                order[key_of[c.id] or ""].append(c.id)
            await succeed(storage, clock.now(), claimed)
    finally:
        await other.close()
    assert order == expected


# --- tenants, priority, queues -----------------------------------------------------------


async def test_small_tenants_do_not_wait_behind_a_big_one(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=4), clock.now())
    await storage.tasks.enqueue([new(tenant="big") for _ in range(40)], clock.now())
    small = [new(tenant=f"small{i}") for i in range(3) for _ in range(2)]
    await storage.tasks.enqueue(small, clock.advance(1))
    small_ids, rounds_until_done = {t.id for t in small}, 0
    while small_ids:
        claimed = await claim(storage, clock.now())
        assert len(claimed) == 4
        small_ids -= {c.id for c in claimed}
        await succeed(storage, clock.advance(0.02), claimed)
        rounds_until_done += 1
    assert rounds_until_done == 2  # plain FIFO would need 11 rounds


async def test_tenants_take_turns_least_recently_served_first(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1), clock.now())
    for tenant in ["a", "b", "c"]:
        await storage.tasks.enqueue([new(tenant=tenant) for _ in range(3)], clock.now())
    tenant_of: dict[str, str] = {}
    for task in (await storage.tasks.list_tasks("q", None, 100, None))[0]:
        tenant_of[task.id] = task.tenant or ""
    served = []
    for _ in range(6):
        [claimed] = await claim(storage, clock.advance(1))
        served.append(tenant_of[claimed.id])
        await succeed(storage, clock.now(), [claimed])
    assert served == ["a", "b", "c", "a", "b", "c"]


async def test_priority_orders_a_tenants_tasks(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1), clock.now())
    low, high = new(tenant="a", priority=0), new(tenant="a", priority=5)
    await storage.tasks.enqueue([low, high], clock.now())
    assert [c.id for c in await claim(storage, clock.now())] == [high.id]


async def test_a_deep_queue_does_not_starve_the_others(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("deep", QueueConfig(max_concurrency=1000), clock.now())
    await storage.tasks.enqueue(in_queue("deep", [new() for _ in range(50)]), clock.now())
    late = new()
    await storage.tasks.enqueue(in_queue("late", [late]), clock.advance(1))
    claimed = await claim(storage, clock.now(), limit=10)
    assert late.id in {c.id for c in claimed}
    assert claimed[:2][1].id == late.id or claimed[0].id == late.id  # in the first round


async def test_pause_and_purge_reach_every_process(
    storage: Storage, database_url: str, clock: VirtualClock
) -> None:
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(4)]), clock.now())
    other = await another_process(storage, database_url)
    try:
        await other.queues.update_queue("q", changing(paused=True), clock.now())
        assert await claim(storage, clock.now()) == []
        await other.queues.update_queue("q", changing(paused=False), clock.now())
        assert len(await claim(storage, clock.now(), limit=1)) == 1
        assert await other.queues.purge_queue("q") == 3
        assert await claim(storage, clock.now()) == []
    finally:
        await other.close()


async def test_priority_decides_within_a_round_across_tenants(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1), clock.now())
    low, high = new(tenant="a", priority=0), new(tenant="b", priority=5)
    await storage.tasks.enqueue([low, high], clock.now())
    assert [c.id for c in await claim(storage, clock.now())] == [high.id]


async def test_a_claim_cut_short_by_tenant_shares_says_more_may_be_due(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1000), clock.now())
    await storage.tasks.enqueue([new(tenant="big") for _ in range(50)], clock.now())
    await storage.tasks.enqueue([new(tenant=f"small{i}") for i in range(3)], clock.now())
    first = await storage.dispatch.claim_tasks(20, clock.now(), token(), MARGIN)
    assert len(first.tasks) == 8  # a share of 5 each: big's five and the three small ones
    assert first.more
    claimed = len(first.tasks)
    while (batch := await storage.dispatch.claim_tasks(20, clock.now(), token(), MARGIN)).tasks:
        claimed += len(batch.tasks)
    assert claimed == 53
    assert not batch.more


async def test_no_rate_wait_for_a_queue_without_room(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=1, rate_limit=10), clock.now())
    await storage.tasks.enqueue([new(), new()], clock.now())
    assert (
        await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
    ).rate_wait is None  # full, not waiting


async def test_a_lagging_clock_does_not_refill_the_bucket_twice(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100, rate_limit=100), clock.now())
    await storage.tasks.enqueue([new() for _ in range(30)], clock.now())
    start = clock.now()
    assert len(await claim(storage, start + timedelta(seconds=10), limit=5)) == 5  # 10 - 5 = 5 left
    assert len(await claim(storage, start + timedelta(seconds=9.5), limit=1)) == 1  # a process 0.5 s behind
    # 4 left, as of t = 10 s (not 9.5 s): 10 ms later that is 5, not the burst of 10.
    assert len(await claim(storage, start + timedelta(seconds=10.01))) == 5
