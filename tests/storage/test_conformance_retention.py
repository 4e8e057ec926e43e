"""The storage contract and the retention maintainer, on both backends, with a shifted
clock: every outcome expires after its own setting, a queue's or a tenant's retention
overrides both settings (the shorter wins when both have one, 0 keeps forever), and an
event goes with its last delivery (docs/retention.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.storage.helpers import URL, new, result_for, token
from tests.support.clock import VirtualClock
from workly.ids import new_id, new_task_id
from workly.models import NewTask, Outcome, QueueConfig
from workly.service.upkeep.retention import Retention
from workly.storage.contract import Storage
from workly.tenants import TenantSpec
from workly.webhooks import EndpointSpec, NewEvent

MARGIN = 30.0
DAY = 86400
SUCCEEDED_FOR, FAILED_FOR = 1 * DAY, 3 * DAY
FAST = QueueConfig(max_concurrency=1000, max_attempts=1)


async def finish(storage: Storage, clock: VirtualClock, outcomes: dict[str, Outcome]) -> None:
    """Claim every ready task and end each with its outcome (by task id)."""
    claimed = (await storage.dispatch.claim_tasks(1000, clock.now(), token(), MARGIN)).tasks
    assert {c.id for c in claimed} == set(outcomes)
    results = [result_for(c, clock.now(), outcomes[c.id], 200 if outcomes[c.id] == "succeeded" else 500)
               for c in claimed]  # fmt: skip
    await storage.dispatch.record_results(results, clock.now())


async def enqueue(storage: Storage, clock: VirtualClock, queue: str = "q", **fields: object) -> NewTask:
    task = new(queue=queue, **fields)
    await storage.tasks.enqueue([task], clock.now())
    return task


async def kept(storage: Storage, *task_ids: str) -> set[str]:
    return {task_id for task_id in task_ids if await storage.tasks.get_task(task_id) is not None}


def keeper(storage: Storage, clock: VirtualClock) -> Retention:
    return Retention(storage.retention, clock, SUCCEEDED_FOR, FAILED_FOR)


async def test_each_outcome_expires_after_its_own_setting(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", FAST, clock.now())
    ok, failed, canceled = [await enqueue(storage, clock) for _ in range(3)]
    await storage.tasks.cancel_task(canceled.id, clock.now())
    await finish(storage, clock, {ok.id: "succeeded", failed.id: "failed"})
    run = keeper(storage, clock)

    clock.advance(SUCCEEDED_FOR - 1)
    await run.run()
    assert await kept(storage, ok.id, failed.id, canceled.id) == {ok.id, failed.id, canceled.id}
    clock.advance(2)
    await run.run()
    assert await kept(storage, ok.id, failed.id, canceled.id) == {failed.id, canceled.id}
    clock.advance(FAILED_FOR - SUCCEEDED_FOR)
    await run.run()
    assert await kept(storage, failed.id, canceled.id) == set()
    assert run.pruned == 3
    queue = await storage.queues.get_queue("q")
    assert queue is not None and sum(queue.counts.values()) == 0


async def test_a_setting_of_zero_keeps_that_outcome_forever(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", FAST, clock.now())
    ok, failed = [await enqueue(storage, clock) for _ in range(2)]
    await finish(storage, clock, {ok.id: "succeeded", failed.id: "failed"})
    clock.advance(100 * DAY)
    await Retention(storage.retention, clock, SUCCEEDED_FOR, 0).run()
    assert await kept(storage, ok.id, failed.id) == {failed.id}


async def test_unfinished_tasks_never_expire(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", replace(FAST, retention=60), clock.now())
    waiting = await enqueue(storage, clock)
    clock.advance(100 * DAY)
    await keeper(storage, clock).run()
    assert await kept(storage, waiting.id) == {waiting.id}


async def test_a_queue_retention_overrides_both_settings(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("short", replace(FAST, retention=60), clock.now())
    await storage.queues.put_queue("long", replace(FAST, retention=10 * DAY), clock.now())
    await storage.queues.put_queue("forever", replace(FAST, retention=0), clock.now())
    await storage.queues.put_queue("q", FAST, clock.now())
    tasks = {
        name: [await enqueue(storage, clock, name) for _ in range(2)]
        for name in ("short", "long", "forever", "q")
    }
    await finish(storage, clock, {t.id: "succeeded" if i == 0 else "failed"
                                  for ts in tasks.values() for i, t in enumerate(ts)})  # fmt: skip
    ids = {name: {t.id for t in ts} for name, ts in tasks.items()}
    run = keeper(storage, clock)

    clock.advance(61)
    await run.run()
    assert await kept(storage, *ids["short"]) == set()  # both outcomes, after the queue's 60 s
    assert await kept(storage, *ids["q"]) == ids["q"]
    clock.advance(5 * DAY)
    await run.run()
    assert await kept(storage, *ids["q"]) == set()  # the settings: 1 and 3 days
    assert await kept(storage, *ids["long"]) == ids["long"]  # longer than both settings
    clock.advance(5 * DAY)
    await run.run()
    assert await kept(storage, *ids["long"]) == set()
    clock.advance(1000 * DAY)
    await run.run()
    assert await kept(storage, *ids["forever"]) == ids["forever"]


async def test_a_tenant_retention_covers_its_tasks_deliveries_and_events(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", FAST, clock.now())
    await storage.tenants.put_tenant("brief", TenantSpec(retention=120), clock.now())
    await storage.tenants.put_tenant("lasting", TenantSpec(retention=10 * DAY), clock.now())
    plain = {t: await enqueue(storage, clock, tenant=t) for t in ("brief", "lasting", "other")}
    deliveries, events = {}, {}
    for tenant in ("brief", "lasting", "other"):
        await storage.webhooks.create_endpoint(
            new_id("ep"), EndpointSpec(url=URL, tenant=tenant, delivery=FAST), clock.now()
        )
        event = NewEvent(
            id=new_id("evt"),
            type="invoice.paid",
            payload=b"{}",
            content_type="application/json",
            tenant=tenant,
        )
        published = await storage.webhooks.publish(event, clock.now(), new_task_id)
        [delivery] = published.event.deliveries
        deliveries[tenant], events[tenant] = delivery.task_id, event.id
    # Every outcome: the brief tenant's plain task fails, its delivery succeeds.
    outcomes: dict[str, Outcome] = {t.id: "failed" for t in plain.values()}
    outcomes.update({task_id: "succeeded" for task_id in deliveries.values()})
    await finish(storage, clock, outcomes)
    run = keeper(storage, clock)

    clock.advance(121)
    await run.run()
    assert await kept(storage, plain["brief"].id, deliveries["brief"]) == set()
    assert await storage.webhooks.get_event(events["brief"]) is None  # with its last delivery
    assert await kept(storage, plain["other"].id, deliveries["other"]) == {
        plain["other"].id,
        deliveries["other"],
    }
    clock.advance(5 * DAY)
    await run.run()
    assert await kept(storage, plain["other"].id, deliveries["other"]) == set()
    assert await storage.webhooks.get_event(events["other"]) is None
    lasting = {plain["lasting"].id, deliveries["lasting"]}
    assert await kept(storage, *lasting) == lasting
    assert await storage.webhooks.get_event(events["lasting"]) is not None
    clock.advance(5 * DAY)
    await run.run()
    assert await kept(storage, *lasting) == set()
    assert await storage.webhooks.get_event(events["lasting"]) is None


async def test_the_shorter_of_a_queue_and_a_tenant_retention_wins(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("long", replace(FAST, retention=10 * DAY), clock.now())
    await storage.queues.put_queue("short", replace(FAST, retention=60), clock.now())
    await storage.tenants.put_tenant("brief", TenantSpec(retention=60), clock.now())
    await storage.tenants.put_tenant("lasting", TenantSpec(retention=10 * DAY), clock.now())
    in_long = await enqueue(storage, clock, "long", tenant="brief")
    in_short = await enqueue(storage, clock, "short", tenant="lasting")
    await finish(storage, clock, {in_long.id: "succeeded", in_short.id: "succeeded"})
    clock.advance(61)
    await keeper(storage, clock).run()
    assert await kept(storage, in_long.id, in_short.id) == set()


async def test_an_event_stays_while_one_of_its_deliveries_does(storage: Storage, clock: VirtualClock) -> None:
    paid = EndpointSpec(url=URL, event_types=("invoice.paid",), delivery=FAST)
    failing = await storage.webhooks.create_endpoint(new_id("ep"), paid, clock.now())
    working = await storage.webhooks.create_endpoint(new_id("ep"), paid, clock.now())
    event = NewEvent(id=new_id("evt"), type="invoice.paid", payload=b"{}", content_type="application/json")
    published = await storage.webhooks.publish(event, clock.now(), new_task_id)
    unmatched = NewEvent(id=new_id("evt"), type="x", payload=b"{}", content_type="application/json")
    await storage.webhooks.publish(unmatched, clock.now(), new_task_id)
    by_endpoint = {d.endpoint_id: d.task_id for d in published.event.deliveries}
    await finish(storage, clock, {by_endpoint[failing.id]: "failed", by_endpoint[working.id]: "succeeded"})
    run = keeper(storage, clock)

    clock.advance(SUCCEEDED_FOR + 1)
    await run.run()
    stored = await storage.webhooks.get_event(event.id)
    assert stored is not None and [d.endpoint_id for d in stored.deliveries] == [failing.id]
    clock.advance(FAILED_FOR)
    await run.run()
    assert await storage.webhooks.get_event(event.id) is None
    assert run.pruned_events == 2  # and the event no endpoint took, after WORKLY_RETENTION


async def test_only_succeeded_tasks_older_than_the_cutoff_are_pruned_in_batches(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", FAST, clock.now())
    old = [new() for _ in range(5)]
    await storage.tasks.enqueue(old, clock.now())
    await finish(storage, clock, {t.id: "failed" if i == 3 else "succeeded" for i, t in enumerate(old)})
    recent = new()
    await storage.tasks.enqueue([recent], clock.advance(3600))
    await finish(storage, clock, {recent.id: "succeeded"})
    cutoff = clock.now() - timedelta(seconds=60)
    assert [await storage.retention.prune_succeeded(cutoff, limit=3) for _ in range(3)] == [3, 1, 0]
    assert await kept(storage, *(t.id for t in old), recent.id) == {old[3].id, recent.id}
    assert [await storage.retention.prune_failed(cutoff, limit=3) for _ in range(2)] == [1, 0]
    queue = await storage.queues.get_queue("q")
    assert queue is not None
    assert (queue.counts["succeeded"], queue.counts["failed"]) == (1, 0)
