"""The storage contract, a tenant's erasure (docs/retention.md), on both backends: an
operation worked in small chunks while another tenant publishes, resumed by another runner
after a lost lease; afterwards no column of any table holds the tenant's name or its
payload bytes, and the other tenant's data is whole."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest

from tests.storage.helpers import URL, new, result_for, token
from tests.support.clock import VirtualClock
from tests.support.db_scan import where_found
from workly.api_keys import ApiKeySpec
from workly.callbacks import CALLBACK_QUEUE
from workly.errors import TenantNotFound
from workly.ids import new_id, new_task_id
from workly.lifecycle import tenant_hash
from workly.models import QueueConfig
from workly.operations import Operation, TaskFilter
from workly.schedules import ScheduleSpec
from workly.sessions import Session
from workly.storage.contract import Storage
from workly.tenants import TenantSpec
from workly.webhooks import EndpointSpec, NewEvent

GONE, KEPT = "tenant-erased-5c81", "tenant-kept-0b2e"
MARKER = b"PAYLOAD-OF-THE-ERASED-e7d1"  # in every payload and body of the erased tenant
LEASE = 30.0
FAST = QueueConfig(max_concurrency=1000, max_attempts=3)


@dataclass
class Made:
    events: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    endpoints: list[str] = field(default_factory=list)


def payload(tenant: str, n: int) -> bytes:
    mark = MARKER.decode() if tenant == GONE else "ordinary"
    return json.dumps({"n": n, "note": mark}).encode()


async def publish(storage: Storage, clock: VirtualClock, tenant: str, n: int) -> str:
    event = NewEvent(id=new_id("evt"), type="invoice.paid", payload=payload(tenant, n),
                     content_type="application/json", tenant=tenant, labels={"who": tenant})  # fmt: skip
    await storage.webhooks.publish(event, clock.now(), new_task_id)
    return event.id


async def fill(storage: Storage, clock: VirtualClock, tenant: str, events: int, plain: int) -> Made:
    """A tenant with keys, a session, endpoints (one deleted since), events and their
    deliveries (some attempted), plain tasks with callbacks, a schedule, an operation."""
    made = Made()
    await storage.tenants.put_tenant(tenant, TenantSpec(name=f"name of {tenant}"), clock.now())
    key = await storage.keys.create_key(
        new_id("key"), ApiKeySpec(tenant, "admin", tenant), f"d-{tenant}", clock.now()
    )
    session = Session(new_id("ses"), key.id, None, clock.now(), clock.now() + timedelta(hours=1), None)
    await storage.sessions.create_session(session, f"s-{tenant}", clock.now())
    for _ in range(3):
        spec = EndpointSpec(url=f"{URL}?{tenant}", tenant=tenant, description=f"for {tenant}", delivery=FAST)
        made.endpoints.append((await storage.webhooks.create_endpoint(new_id("ep"), spec, clock.now())).id)
    made.events += [await publish(storage, clock, tenant, n) for n in range(events // 2)]
    plain_tasks = [
        new(queue="shared", tenant=tenant, body=payload(tenant, n), key=f"k-{tenant}") for n in range(plain)
    ]
    await storage.tasks.enqueue(plain_tasks, clock.now())
    made.tasks += [task.id for task in plain_tasks]
    # Attempts: every delivery and task due now is tried once; half fail for good.
    claimed = (await storage.dispatch.claim_tasks(10_000, clock.now(), token(), LEASE)).tasks
    results = [result_for(c, clock.now(), "failed" if i % 2 else "succeeded", 500 if i % 2 else 200)
               for i, c in enumerate(claimed)]  # fmt: skip
    await storage.dispatch.record_results(results, clock.now())
    callbacks = [
        new(queue=CALLBACK_QUEUE, callback_of=task_id, body=payload(tenant, 0)) for task_id in made.tasks[:5]
    ]
    await storage.tasks.enqueue(callbacks, clock.now())
    await storage.webhooks.delete_endpoint(made.endpoints.pop(), clock.now())  # its finished deliveries stay
    made.events += [await publish(storage, clock, tenant, n) for n in range(events // 2, events)]
    template = NewEvent(
        id="", type="invoice.due", payload=payload(tenant, -1), content_type="application/json", tenant=tenant
    )
    await storage.schedules.create_schedule(new_id("sch"), ScheduleSpec(cron="0 0 * * *", event=template),
                                            clock.now() + timedelta(days=1), clock.now())  # fmt: skip
    # A bulk cancel of its tasks, done: its filter names the tenant.
    cancel = await storage.operations.create_operation(
        new_id("op"), "cancel", TaskFilter(tenant=tenant), clock.now()
    )
    lease = token()
    assert await storage.operations.take_operation(clock.now(), lease, LEASE) is not None
    state = "running"
    while state == "running":
        done = await storage.operations.run_operation_chunk(cancel.id, lease, clock.now(), LEASE)
        assert done is not None
        state = done.operation.state
    return made


async def notice(
    storage: Storage, clock: VirtualClock, operator: str, tenant: str, kind: str = "workly.endpoint.disabled"
) -> str:
    """Workly's own notice about ``tenant`` (its endpoint disabled, its task failed), to the
    operator's endpoint."""
    body = json.dumps({"type": kind, "data": {"id": "ep_x", "tenant": tenant}}).encode()
    event = NewEvent(id=new_id("evt"), type=kind, payload=body, content_type="application/json")
    published = await storage.webhooks.publish(event, clock.now(), new_task_id)
    assert [d.endpoint_id for d in published.event.deliveries] == [operator]
    return event.id


async def run_to_the_end(
    storage: Storage, clock: VirtualClock, operation: Operation, chunk: int, churn: bool = False
) -> Operation:
    """Work the erase in chunks, the other tenant publishing between them; halfway, the
    runner loses its lease and another takes over from where it stood. ``churn``: early on,
    the erased tenant's plain tasks are enqueued and claimed too."""
    lease = token()
    assert await storage.operations.take_operation(clock.now(), lease, LEASE) is not None
    for step in range(10_000):
        done = await storage.operations.run_operation_chunk(operation.id, lease, clock.now(), LEASE, chunk)
        assert done is not None
        if done.operation.state != "running":
            return done.operation
        await publish(storage, clock, KEPT, 1000 + step)
        if churn and step == 3:  # its plain tasks enqueued and claimed meanwhile: fairness turns come back
            late = [
                new(queue="late", url="http://127.0.0.1:10/late", tenant=GONE, body=MARKER) for _ in range(3)
            ]
            await storage.tasks.enqueue(late, clock.now())
            claimed = (await storage.dispatch.claim_tasks(100, clock.now(), token(), LEASE)).tasks
            assert len(claimed) >= 3
        if step == 12:  # this runner stalls past its lease: another resumes
            clock.advance(LEASE + 1)
            lease = token()
            assert await storage.operations.take_operation(clock.now(), lease, LEASE) is not None
    raise AssertionError("the erase never finished")


async def test_an_erased_tenant_leaves_no_trace_and_the_other_is_whole(
    storage: Storage, clock: VirtualClock, database_url: str
) -> None:
    operator = await storage.webhooks.create_endpoint(
        new_id("ep"), EndpointSpec(url=URL, event_types=("workly.*",)), clock.now()
    )
    gone = await fill(storage, clock, GONE, events=120, plain=60)
    kept = await fill(storage, clock, KEPT, events=40, plain=20)
    gone_notice = await notice(storage, clock, operator.id, GONE)
    gone_failure = await notice(storage, clock, operator.id, GONE, "workly.task.failed")
    kept_notice = await notice(storage, clock, operator.id, KEPT)
    assert await where_found(database_url, GONE.encode())  # there to erase
    assert await where_found(database_url, MARKER)

    created = await storage.operations.create_operation(
        new_id("op"), "erase", TaskFilter(tenant=GONE), clock.now()
    )
    assert (created.action, created.state, created.filter.tenant) == ("erase", "running", GONE)
    assert created.matched >= 120 + 60
    again = await storage.operations.create_operation(
        new_id("op"), "erase", TaskFilter(tenant=GONE), clock.now()
    )
    assert again.id == created.id  # one erase of a tenant at a time: the running one answers
    finished = await run_to_the_end(storage, clock, created, chunk=25, churn=True)

    assert finished.state == "succeeded" and finished.filter.tenant == tenant_hash(GONE)
    assert finished.changed >= created.matched
    assert await where_found(database_url, GONE.encode()) == []
    assert await where_found(database_url, MARKER) == []
    for event_id in [*gone.events, gone_notice, gone_failure]:
        assert await storage.webhooks.get_event(event_id) is None
    assert await storage.tenants.get_tenant(GONE) is None
    # The other tenant: every event, task, endpoint, the tenant, its notice and schedule.
    assert all([await storage.webhooks.get_event(e) is not None for e in [*kept.events, kept_notice]])
    assert all([await storage.tasks.get_task(t) is not None for t in kept.tasks])
    assert all([await storage.webhooks.get_endpoint(e) is not None for e in kept.endpoints])
    assert await storage.tenants.get_tenant(KEPT) is not None
    assert len(await where_found(database_url, KEPT.encode())) > len(kept.events)
    schedules, _ = await storage.schedules.list_schedules(10, None)
    assert [s.spec.event.tenant for s in schedules if s.spec.event is not None] == [KEPT]


async def test_concurrent_erasures_of_a_tenant_are_one(storage: Storage, clock: VirtualClock) -> None:
    await storage.tenants.put_tenant(GONE, TenantSpec(), clock.now())
    asked = [storage.operations.create_operation(new_id("op"), "erase", TaskFilter(tenant=GONE), clock.now())
             for _ in range(4)]  # fmt: skip
    assert len({operation.id for operation in await asyncio.gather(*asked)}) == 1


async def test_a_tenant_named_by_a_key_or_a_schedule_only_is_erased(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.keys.create_key(new_id("key"), ApiKeySpec("k", "reader", GONE), "digest", clock.now())
    template = NewEvent(
        id="", type="a.b", payload=MARKER, content_type="application/json", tenant="only-a-schedule"
    )
    await storage.schedules.create_schedule(
        new_id("sch"),
        ScheduleSpec(cron="0 0 * * *", event=template),
        clock.now() + timedelta(days=1),
        clock.now(),
    )
    for tenant in (GONE, "only-a-schedule"):
        created = await storage.operations.create_operation(
            new_id("op"), "erase", TaskFilter(tenant=tenant), clock.now()
        )
        assert (await run_to_the_end(storage, clock, created, chunk=10)).state == "succeeded"
    keys, _ = await storage.keys.list_keys(10, None)
    schedules, _ = await storage.schedules.list_schedules(10, None)
    assert keys == [] and schedules == []


async def test_an_unknown_tenant_is_not_erased(storage: Storage, clock: VirtualClock) -> None:
    with pytest.raises(TenantNotFound):
        await storage.operations.create_operation(
            new_id("op"), "erase", TaskFilter(tenant="nobody"), clock.now()
        )
    operations, _ = await storage.operations.list_operations(10, None)
    assert operations == []


async def test_a_tenant_of_plain_tasks_only_is_erased(storage: Storage, clock: VirtualClock) -> None:
    tasks = [new(tenant=GONE, body=MARKER) for _ in range(3)]
    await storage.tasks.enqueue([*tasks, replace(new(), tenant=KEPT)], clock.now())
    created = await storage.operations.create_operation(
        new_id("op"), "erase", TaskFilter(tenant=GONE), clock.now()
    )
    finished = await run_to_the_end(storage, clock, created, chunk=2)
    assert finished.state == "succeeded"
    assert all([await storage.tasks.get_task(t.id) is None for t in tasks])
    queue = await storage.queues.get_queue("q")
    assert queue is not None and queue.counts["ready"] == 1
