"""The storage contract, webhook side: endpoints, events and their fan-out, circuit breakers
and auto-disable. Every test runs on SQLite and on PostgreSQL, on the injected clock.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.storage.helpers import URL, in_queue, new, result_for, token
from tests.support.clock import VirtualClock
from workly.breaker import HELD_UNTIL, BreakerRules
from workly.errors import EndpointGone, EndpointNotFound, StorageConflict, TaskStateConflict
from workly.ids import new_id, new_task_id
from workly.models import AttemptResult, BreakerEffect, ClaimedTask, Outcome, QueueConfig, Task
from workly.operations import TaskFilter
from workly.storage.contract import Storage
from workly.webhooks import Endpoint, EndpointSpec, NewEvent, Published

MARGIN = 30.0
RULES = BreakerRules(threshold=3, cooldown=30)
ORIGIN = "http://127.0.0.1:9"
OTHER_ORIGIN = "http://127.0.0.1:10"
PAYLOAD = b'{"invoice":42}'


# --- builders ---------------------------------------------------------------------------


def spec(**fields: Any) -> EndpointSpec:
    return replace(EndpointSpec(url=URL), **fields)


async def endpoint(storage: Storage, clock: VirtualClock, **fields: Any) -> Endpoint:
    return await storage.webhooks.create_endpoint(new_id("ep"), spec(**fields), clock.now())


def event(event_type: str = "invoice.paid", **fields: Any) -> NewEvent:
    base = NewEvent(id=new_id("evt"), type=event_type, payload=PAYLOAD, content_type="application/json")
    return replace(base, **fields)


async def publish(
    storage: Storage, clock: VirtualClock, event_type: str = "invoice.paid", **fields: Any
) -> Published:
    return await storage.webhooks.publish(event(event_type, **fields), clock.now(), new_task_id)


def receivers(published: Published) -> set[str]:
    return {d.endpoint_id for d in published.event.deliveries}


async def claim(storage: Storage, now: datetime, limit: int = 100) -> list[ClaimedTask]:
    return (await storage.dispatch.claim_tasks(limit, now, token(), MARGIN)).tasks


def outcome(
    claimed: ClaimedTask,
    now: datetime,
    effect: BreakerEffect | None,
    result: Outcome = "retry",
    status_code: int | None = 500,
    retry_in: float = 1.0,
) -> AttemptResult:
    """An attempt that started and finished at ``now``, saying ``effect`` about its breaker."""
    return AttemptResult(
        task_seq=claimed.seq,
        lease_token=claimed.lease_token,
        attempt=claimed.attempt,
        started_at=now,
        finished_at=now,
        status_code=status_code,
        error=None if status_code is not None and 200 <= status_code < 300 else f"HTTP {status_code}",
        response=b"",
        outcome=result,
        next_run_at=now + timedelta(seconds=retry_in) if result == "retry" else None,
        breaker=claimed.breaker,
        effect=effect,
        endpoint_id=claimed.endpoint_id,
    )


async def task(storage: Storage, task_id: str) -> Task:
    found = await storage.tasks.get_task(task_id)
    assert found is not None
    return found


async def health_of(storage: Storage, endpoint_id: str) -> Endpoint:
    found = await storage.webhooks.get_endpoint(endpoint_id)
    assert found is not None
    return found


async def all_tasks(storage: Storage) -> list[Task]:
    found, _ = await storage.tasks.list_tasks(None, None, 1000, None)
    return found


async def open_breaker(
    storage: Storage, clock: VirtualClock, endpoint_id: str, events: int = 5
) -> tuple[list[str], list[ClaimedTask]]:
    """Publish ``events`` events to one endpoint, fail three deliveries: its breaker opens.
    Returns the delivery task ids in publish order and the three that failed."""
    ids = [(await publish(storage, clock)).event.deliveries[0].task_id for _ in range(events)]
    failed = await claim(storage, clock.now(), limit=3)
    assert [c.id for c in failed] == ids[:3]
    summary = await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in failed], clock.now(), RULES
    )
    assert summary.accepted == 3
    return ids, failed


# --- endpoints --------------------------------------------------------------------------


async def test_create_endpoint_makes_its_queue(storage: Storage, clock: VirtualClock) -> None:
    delivery = QueueConfig(max_concurrency=7, max_attempts=4, timeout=5.0, signing_secret="whsec_abc")
    created = await endpoint(
        storage,
        clock,
        description="billing",
        event_types=("invoice.*", "customer.created"),
        tenant="acme",
        headers={"x-api": "1"},
        delivery=delivery,
    )
    assert created.id.startswith("ep_")
    assert created.spec.url == URL
    assert created.spec.description == "billing"
    assert created.spec.event_types == ("invoice.*", "customer.created")
    assert (created.spec.tenant, created.spec.headers) == ("acme", {"x-api": "1"})
    assert created.spec.delivery == delivery
    assert created.enabled
    assert created.health.state == "healthy"
    assert (created.health.consecutive_failures, created.health.probe_at) == (0, None)
    assert created.created_at == created.updated_at == clock.now()
    queue = await storage.queues.get_queue(created.id)
    assert queue is not None
    assert queue.config == delivery  # its settings, its secret, not paused
    assert await storage.webhooks.get_endpoint(created.id) == created


async def test_list_endpoints_newest_first_with_cursor_and_tenant(
    storage: Storage, clock: VirtualClock
) -> None:
    first = await endpoint(storage, clock, tenant="a")
    second = await endpoint(storage, clock)
    third = await endpoint(storage, clock, tenant="a")
    page, cursor = await storage.webhooks.list_endpoints(None, 2, None)
    assert [e.id for e in page] == [third.id, second.id]
    assert cursor is not None
    rest, end = await storage.webhooks.list_endpoints(None, 2, cursor)
    assert [e.id for e in rest] == [first.id]
    assert end is None
    tenant_page, tenant_cursor = await storage.webhooks.list_endpoints("a", 10, None)
    assert [e.id for e in tenant_page] == [third.id, first.id]
    assert tenant_cursor is None
    assert await storage.webhooks.list_endpoints("nobody", 10, None) == ([], None)
    assert page[0] == await storage.webhooks.get_endpoint(third.id)


async def test_update_endpoint_applies_a_change_and_moves_ready_deliveries(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock)
    done = (await publish(storage, clock)).event.deliveries[0].task_id
    [claimed] = await claim(storage, clock.now())
    await storage.dispatch.record_results(
        [outcome(claimed, clock.now(), "ok", "succeeded", 200)], clock.now()
    )
    waiting = (await publish(storage, clock)).event.deliveries[0].task_id
    new_url = "http://127.0.0.1:9/moved"

    def change(current: EndpointSpec) -> EndpointSpec:
        assert current == created.spec  # the stored spec is what the change sees
        return replace(
            current,
            url=new_url,
            description="moved",
            event_types=("order.*",),
            headers={"x-b": "2"},
            delivery=replace(current.delivery, max_concurrency=9),
        )

    updated = await storage.webhooks.update_endpoint(created.id, change, clock.advance(5))
    assert updated.spec.url == new_url
    assert (updated.spec.description, updated.spec.event_types) == ("moved", ("order.*",))
    assert updated.spec.headers == {"x-b": "2"}
    assert updated.spec.delivery.max_concurrency == 9
    assert updated.updated_at == clock.now()
    assert updated.created_at == created.created_at
    assert await storage.webhooks.get_endpoint(created.id) == updated
    queue = await storage.queues.get_queue(created.id)
    assert queue is not None
    assert (queue.config.max_concurrency, queue.config.paused) == (9, False)
    assert (await task(storage, waiting)).url == new_url  # a delivery still waiting goes to the new URL
    assert (await task(storage, done)).url == URL  # a finished one keeps the URL it went to


async def test_update_keeps_a_disabled_endpoint_disabled(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock)
    await storage.webhooks.set_endpoint_enabled(created.id, False, "maintenance", clock.now())

    def change(current: EndpointSpec) -> EndpointSpec:
        return replace(current, delivery=replace(current.delivery, max_concurrency=4))

    updated = await storage.webhooks.update_endpoint(created.id, change, clock.now())
    assert not updated.enabled
    assert (updated.health.state, updated.health.disabled_reason) == ("disabled", "maintenance")
    queue = await storage.queues.get_queue(created.id)
    assert queue is not None
    assert (queue.config.max_concurrency, queue.config.paused) == (4, True)


async def test_update_endpoint_raises_what_the_change_raises(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock)

    def change(current: EndpointSpec) -> EndpointSpec:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        await storage.webhooks.update_endpoint(created.id, change, clock.advance(1))
    assert await storage.webhooks.get_endpoint(created.id) == created


async def test_delete_endpoint_removes_it_and_its_pending_deliveries(
    storage: Storage, clock: VirtualClock
) -> None:
    doomed = await endpoint(storage, clock)
    kept = await endpoint(storage, clock)
    delivered = await publish(storage, clock)
    claimed = await claim(storage, clock.now())
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), None, "succeeded", 200) for c in claimed], clock.now()
    )
    pending = await publish(storage, clock)
    assert receivers(pending) == {doomed.id, kept.id}
    await storage.tasks.enqueue(in_queue("plain", [new()]), clock.now())
    await storage.webhooks.delete_endpoint(doomed.id, clock.now())
    assert await storage.webhooks.get_endpoint(doomed.id) is None
    assert [e.id for e in (await storage.webhooks.list_endpoints(None, 10, None))[0]] == [kept.id]
    # Its pending delivery went; its finished one stays visible on its event until
    # retention, in its queue, which is retired: not listed, and paused.
    stored = await storage.webhooks.get_event(pending.event.id)
    assert stored is not None and [d.endpoint_id for d in stored.deliveries] == [kept.id]
    finished = await storage.webhooks.get_event(delivered.event.id)
    assert finished is not None
    assert {(d.endpoint_id, d.status) for d in finished.deliveries} == {
        (doomed.id, "succeeded"),
        (kept.id, "succeeded"),
    }
    assert doomed.id not in {q.name for q in await storage.queues.list_queues()}
    assert await claim(storage, clock.now()) != []  # the plain task and kept's pending delivery
    # Once retention has taken its last delivery, the retired queue goes too.
    assert await storage.retention.prune_retired_queues() == 0
    assert await storage.retention.prune_succeeded(clock.advance(60), limit=100) == 2
    assert await storage.retention.prune_retired_queues() == 1
    assert await storage.queues.get_queue(doomed.id) is None
    assert await storage.queues.get_queue(kept.id) is not None


async def test_a_deleted_endpoints_delivery_is_never_retried(storage: Storage, clock: VirtualClock) -> None:
    doomed = await endpoint(storage, clock, delivery=QueueConfig(max_attempts=1))
    published = await publish(storage, clock)
    [claimed] = await claim(storage, clock.now())
    await storage.dispatch.record_results([outcome(claimed, clock.now(), None, "failed", 500)], clock.now())
    await storage.webhooks.delete_endpoint(doomed.id, clock.now())
    task_id = published.event.deliveries[0].task_id
    with pytest.raises(EndpointGone, match="was deleted"):
        await storage.tasks.retry_task(task_id, clock.now())
    bulk = await storage.operations.create_operation(
        new_id("op"), "retry", TaskFilter(endpoint_id=doomed.id), clock.now()
    )
    lease = token()
    assert await storage.operations.take_operation(clock.now(), lease, 30) is not None
    done = await storage.operations.run_operation_chunk(bulk.id, lease, clock.now(), 30)
    assert done is not None and (done.operation.changed, done.operation.skipped) == (0, 1)
    stored = await storage.tasks.get_task(task_id)
    assert stored is not None and stored.status == "failed"


async def test_delete_endpoint_without_finished_deliveries_removes_its_queue(
    storage: Storage, clock: VirtualClock
) -> None:
    doomed = await endpoint(storage, clock)
    await publish(storage, clock)
    await storage.webhooks.delete_endpoint(doomed.id, clock.now())
    assert await storage.queues.get_queue(doomed.id) is None
    assert await all_tasks(storage) == []


async def test_unknown_endpoints(storage: Storage, clock: VirtualClock) -> None:
    missing = new_id("ep")
    assert await storage.webhooks.get_endpoint(missing) is None
    with pytest.raises(EndpointNotFound):
        await storage.webhooks.update_endpoint(missing, lambda s: s, clock.now())
    with pytest.raises(EndpointNotFound):
        await storage.webhooks.delete_endpoint(missing, clock.now())
    with pytest.raises(EndpointNotFound):
        await storage.webhooks.set_endpoint_enabled(missing, True, None, clock.now())
    with pytest.raises(EndpointNotFound):
        await storage.webhooks.set_endpoint_enabled(missing, False, "x", clock.now())
    with pytest.raises(EndpointNotFound):
        await storage.webhooks.recover_endpoint(missing, clock.now(), clock.now())
    # A plain queue is not an endpoint.
    await storage.queues.put_queue("plain", QueueConfig(), clock.now())
    with pytest.raises(EndpointNotFound):
        await storage.webhooks.delete_endpoint("plain", clock.now())
    assert await storage.queues.get_queue("plain") is not None


# --- publish: fan-out ------------------------------------------------------------------


async def test_publish_fans_out_to_matching_endpoints(storage: Storage, clock: VirtualClock) -> None:
    exact = await endpoint(storage, clock, event_types=("invoice.paid",))
    prefix = await endpoint(storage, clock, event_types=("invoice.*",))
    every = await endpoint(storage, clock, event_types=None)
    other = await endpoint(storage, clock, event_types=("customer.created", "order.*"))
    assert receivers(await publish(storage, clock, "invoice.paid")) == {exact.id, prefix.id, every.id}
    assert receivers(await publish(storage, clock, "invoice.x.y")) == {prefix.id, every.id}
    assert receivers(await publish(storage, clock, "invoices.paid")) == {every.id}
    assert receivers(await publish(storage, clock, "invoice")) == {every.id}
    assert receivers(await publish(storage, clock, "customer.created")) == {other.id, every.id}
    assert receivers(await publish(storage, clock, "order.shipped.late")) == {other.id, every.id}
    nobody = await storage.webhooks.publish(event("invoice.paid", tenant="nobody"), clock.now(), new_task_id)
    assert nobody.created
    assert nobody.event.deliveries == []
    assert await storage.webhooks.get_event(nobody.event.id) == nobody.event


async def test_publish_keeps_tenants_apart(storage: Storage, clock: VirtualClock) -> None:
    untenanted = await endpoint(storage, clock)
    tenant_a = await endpoint(storage, clock, tenant="a")
    tenant_b = await endpoint(storage, clock, tenant="b")
    assert receivers(await publish(storage, clock)) == {untenanted.id}
    assert receivers(await publish(storage, clock, tenant="a")) == {tenant_a.id}
    assert receivers(await publish(storage, clock, tenant="b")) == {tenant_b.id}
    assert receivers(await publish(storage, clock, tenant="c")) == set()


async def test_disabled_endpoints_get_no_events(storage: Storage, clock: VirtualClock) -> None:
    enabled = await endpoint(storage, clock)
    disabled = await endpoint(storage, clock)
    _, changed = await storage.webhooks.set_endpoint_enabled(
        disabled.id, False, "paused by hand", clock.now()
    )
    assert changed
    assert receivers(await publish(storage, clock)) == {enabled.id}
    await storage.webhooks.set_endpoint_enabled(disabled.id, True, None, clock.now())
    assert receivers(await publish(storage, clock)) == {enabled.id, disabled.id}


async def test_each_delivery_is_a_task_of_the_endpoint(storage: Storage, clock: VirtualClock) -> None:
    plain = await endpoint(storage, clock, headers={"x-a": "1"})
    typed = await endpoint(
        storage, clock, url="http://127.0.0.1:9/typed", headers={"Content-Type": "text/plain", "x-b": "2"}
    )
    published = await publish(storage, clock, key="order-7")
    assert published.created
    stored = published.event
    assert (stored.type, stored.tenant, stored.key, stored.payload) == (
        "invoice.paid",
        None,
        "order-7",
        PAYLOAD,
    )
    assert (stored.content_type, stored.run_at, stored.created_at) == (
        "application/json",
        clock.now(),
        clock.now(),
    )
    assert [(d.endpoint_id, d.status, d.attempts) for d in stored.deliveries] == [
        (plain.id, "ready", 0),
        (typed.id, "ready", 0),
    ]
    by_endpoint = {d.endpoint_id: await task(storage, d.task_id) for d in stored.deliveries}
    for endpoint_id, delivery in by_endpoint.items():
        assert delivery.id.startswith("task_")
        assert (delivery.event_id, delivery.endpoint_id, delivery.queue) == (
            stored.id,
            endpoint_id,
            endpoint_id,
        )
        assert (delivery.method, delivery.body, delivery.status) == ("POST", PAYLOAD, "ready")
        assert (delivery.run_at, delivery.key, delivery.attempts) == (clock.now(), "order-7", 0)
    assert by_endpoint[plain.id].url == URL
    assert by_endpoint[plain.id].headers == {"x-a": "1", "content-type": "application/json"}
    assert by_endpoint[typed.id].url == "http://127.0.0.1:9/typed"
    assert by_endpoint[typed.id].headers == {"Content-Type": "text/plain", "x-b": "2"}
    assert await storage.webhooks.get_event(stored.id) == stored


async def test_a_delayed_event_is_delivered_when_due(storage: Storage, clock: VirtualClock) -> None:
    await endpoint(storage, clock)
    later = clock.now() + timedelta(seconds=60)
    published = await publish(storage, clock, run_at=later)
    assert published.event.run_at == later
    assert (await task(storage, published.event.deliveries[0].task_id)).run_at == later
    assert await claim(storage, clock.advance(59)) == []
    assert [c.event_id for c in await claim(storage, clock.advance(1))] == [published.event.id]


async def test_list_events_newest_first_filtered(storage: Storage, clock: VirtualClock) -> None:
    first = await publish(storage, clock, "invoice.paid")
    second = await publish(storage, clock, "invoice.paid", tenant="a")
    third = await publish(storage, clock, "customer.created")
    page, cursor = await storage.webhooks.list_events(None, None, 2, None)
    assert [e.id for e in page] == [third.event.id, second.event.id]
    assert cursor is not None
    rest, end = await storage.webhooks.list_events(None, None, 2, cursor)
    assert ([e.id for e in rest], end) == ([first.event.id], None)
    by_type, _ = await storage.webhooks.list_events("invoice.paid", None, 10, None)
    assert [e.id for e in by_type] == [second.event.id, first.event.id]
    by_tenant, _ = await storage.webhooks.list_events(None, "a", 10, None)
    assert [e.id for e in by_tenant] == [second.event.id]
    assert await storage.webhooks.get_event(new_id("evt")) is None


# --- publish: idempotency and atomicity -----------------------------------------------


async def test_publish_with_a_taken_idempotency_key_stores_nothing(
    storage: Storage, clock: VirtualClock
) -> None:
    await endpoint(storage, clock)
    original = await publish(storage, clock, idempotency_key="k1")
    assert original.created
    clock.advance(1)
    again = await publish(storage, clock, idempotency_key="k1")
    assert not again.created
    assert again.event == original.event
    assert len(await all_tasks(storage)) == 1
    assert len((await storage.webhooks.list_events(None, None, 10, None))[0]) == 1


async def test_idempotency_keys_are_per_tenant(storage: Storage, clock: VirtualClock) -> None:
    await endpoint(storage, clock)
    await endpoint(storage, clock, tenant="a")
    await endpoint(storage, clock, tenant="b")
    untenanted = await publish(storage, clock, idempotency_key="k")
    in_a = await publish(storage, clock, idempotency_key="k", tenant="a")
    in_b = await publish(storage, clock, idempotency_key="k", tenant="b")
    assert untenanted.created and in_a.created and in_b.created
    assert len({untenanted.event.id, in_a.event.id, in_b.event.id}) == 3
    again_a = await publish(storage, clock, idempotency_key="k", tenant="a")
    assert (again_a.created, again_a.event.id) == (False, in_a.event.id)
    assert len(await all_tasks(storage)) == 3


async def test_retrying_a_publish_with_its_event_id_stores_nothing(
    storage: Storage, clock: VirtualClock
) -> None:
    await endpoint(storage, clock)
    first = event()
    published = await storage.webhooks.publish(first, clock.now(), new_task_id)
    assert published.created
    retried = await storage.webhooks.publish(first, clock.advance(1), new_task_id)
    assert not retried.created
    assert retried.event == published.event
    assert len(await all_tasks(storage)) == 1


async def test_a_failed_publish_stores_nothing(storage: Storage, clock: VirtualClock) -> None:
    await endpoint(storage, clock)
    await endpoint(storage, clock)
    [plain] = await storage.tasks.enqueue(in_queue("plain", [new()]), clock.now())
    ids = iter([new_task_id(), plain.task.id])  # the second delivery collides with a stored task
    failing = event(idempotency_key="once")
    with pytest.raises(StorageConflict):
        await storage.webhooks.publish(failing, clock.now(), lambda: next(ids))
    assert await storage.webhooks.get_event(failing.id) is None
    assert (await storage.webhooks.list_events(None, None, 10, None))[0] == []
    assert [t.id for t in await all_tasks(storage)] == [plain.task.id]
    # Nothing of it is left behind: the same event (and key) publishes afterwards.
    published = await storage.webhooks.publish(failing, clock.now(), new_task_id)
    assert published.created
    assert len(published.event.deliveries) == 2


# --- claim and delivery ------------------------------------------------------------------


async def test_claimed_deliveries_carry_their_event_endpoint_and_breaker(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_attempts=4, timeout=5.0))
    published = await publish(storage, clock)
    [claimed] = await claim(storage, clock.now())
    assert claimed.id == published.event.deliveries[0].task_id
    assert (claimed.event_id, claimed.endpoint_id, claimed.breaker) == (
        published.event.id,
        created.id,
        created.id,
    )
    assert (claimed.queue, claimed.url, claimed.method, claimed.body) == (created.id, URL, "POST", PAYLOAD)
    assert (claimed.max_attempts, claimed.timeout, claimed.attempt) == (4, 5.0, 1)
    stored = await storage.webhooks.get_event(published.event.id)
    assert stored is not None
    assert [(d.status, d.attempts) for d in stored.deliveries] == [("running", 1)]


async def test_endpoint_delivery_settings_apply_to_the_claim(storage: Storage, clock: VirtualClock) -> None:
    narrow = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=2))
    for _ in range(4):
        await publish(storage, clock)
    first = await claim(storage, clock.now())
    assert len(first) == 2
    assert {c.queue for c in first} == {narrow.id}
    assert await claim(storage, clock.now()) == []
    await storage.dispatch.record_results(
        [outcome(first[0], clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert len(await claim(storage, clock.now())) == 1


async def test_a_failing_endpoint_gets_one_delivery_at_a_time(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=5))
    for _ in range(4):
        await publish(storage, clock)
    [first] = await claim(storage, clock.now(), limit=1)
    await storage.dispatch.record_results([outcome(first, clock.now(), "fail")], clock.now(), RULES)
    failing = await health_of(storage, created.id)
    assert failing.health.state == "failing"
    assert (failing.health.consecutive_failures, failing.health.failing_since) == (1, clock.now())
    assert failing.health.probe_at is None
    assert len(await claim(storage, clock.now())) == 1  # not five: one at a time while it fails
    assert await claim(storage, clock.now()) == []


# --- the circuit breaker -----------------------------------------------------------------


async def test_an_open_breaker_holds_the_endpoint_tasks(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    opened_at = clock.now()
    ids, _ = await open_breaker(storage, clock, created.id)
    state = await health_of(storage, created.id)
    assert state.health.state == "open"
    assert state.health.consecutive_failures == 3
    assert state.health.failing_since == opened_at
    assert state.health.probe_at == opened_at + timedelta(seconds=30)
    # Long past every task's due time, nothing of the endpoint is claimable ...
    assert await claim(storage, clock.advance(20)) == []
    # ... and each held task still shows when it was due, with no attempt spent.
    for task_id in ids[:3]:
        held = await task(storage, task_id)
        assert (held.status, held.attempts, held.run_at) == ("ready", 1, opened_at + timedelta(seconds=1))
    for task_id in ids[3:]:
        held = await task(storage, task_id)
        assert (held.status, held.attempts, held.run_at) == ("ready", 0, opened_at)
    assert HELD_UNTIL not in {t.run_at for t in await all_tasks(storage)}
    listed, _ = await storage.tasks.list_tasks(created.id, "ready", 10, None)
    assert {t.run_at.year for t in listed} == {2030}


async def test_probe_cycle_reopens_then_closes(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    opened_at = clock.now()
    ids, _ = await open_breaker(storage, clock, created.id)
    clock.advance(1)
    late = (await publish(storage, clock)).event.deliveries[0].task_id  # published while open
    assert (await task(storage, late)).run_at == clock.now()

    # Before probe_at nothing is released; at it, exactly one task: the first that was due.
    assert await storage.upkeep.release_probes(clock.advance(28.999)) == 0
    assert await claim(storage, clock.now()) == []
    assert await storage.upkeep.release_probes(opened_at + timedelta(seconds=30)) == 1
    clock.set(opened_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 0  # its probe is out: no second one
    [probe] = await claim(storage, clock.now())
    assert probe.id == ids[3]
    assert probe.attempt == 1
    assert await claim(storage, clock.now()) == []
    assert await storage.upkeep.release_probes(clock.now()) == 0  # still out while it runs

    # The probe fails: open again, with the cool-down doubled.
    reopened_at = clock.advance(2)
    summary = await storage.dispatch.record_results([outcome(probe, clock.now(), "fail")], clock.now(), RULES)
    assert (summary.accepted, summary.released, summary.disabled) == (1, 0, ())
    state = await health_of(storage, created.id)
    assert state.health.state == "open"
    assert state.health.consecutive_failures == 4
    assert state.health.probe_at == reopened_at + timedelta(seconds=60)
    assert await claim(storage, clock.advance(10)) == []  # the failed probe is held as well
    assert await storage.upkeep.release_probes(reopened_at + timedelta(seconds=59)) == 0
    clock.set(reopened_at + timedelta(seconds=60))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [second_probe] = await claim(storage, clock.now())
    assert second_probe.id == ids[4]  # ids[3] was due again at reopened_at + 1 s, later than ids[4]

    # The second probe succeeds: the breaker closes and every held task flows at once.
    closed_at = clock.advance(1)
    summary = await storage.dispatch.record_results(
        [outcome(second_probe, clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert summary.accepted == 1
    held = {ids[0], ids[1], ids[2], ids[3], late}
    assert summary.released == len(held)
    state = await health_of(storage, created.id)
    assert state.health.state == "healthy"
    assert (state.health.consecutive_failures, state.health.failing_since, state.health.probe_at) == (
        0,
        None,
        None,
    )
    assert state.health.last_success_at == closed_at
    flowing = await claim(storage, clock.now())
    assert {c.id for c in flowing} == held
    attempts = {c.id: c.attempt for c in flowing}
    assert attempts == {ids[0]: 2, ids[1]: 2, ids[2]: 2, ids[3]: 2, late: 1}  # holding spent none


async def test_a_success_that_is_not_the_probe_also_closes(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    for _ in range(4):
        await publish(storage, clock)
    claimed = await claim(storage, clock.now())
    assert len(claimed) == 4
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in claimed[:3]], clock.now(), RULES
    )
    assert (await health_of(storage, created.id)).health.state == "open"
    # The fourth attempt started before the breaker opened and answers: it closes.
    summary = await storage.dispatch.record_results(
        [outcome(claimed[3], clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert summary.released == 3
    assert (await health_of(storage, created.id)).health.state == "healthy"
    assert {c.id for c in await claim(storage, clock.advance(1))} == {c.id for c in claimed[:3]}


async def test_a_late_failure_while_open_does_not_push_the_probe_back(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    for _ in range(4):
        await publish(storage, clock)
    claimed = await claim(storage, clock.now())
    opened_at = clock.now()
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in claimed[:3]], clock.now(), RULES
    )
    await storage.dispatch.record_results([outcome(claimed[3], clock.advance(5), "fail")], clock.now(), RULES)
    state = await health_of(storage, created.id)
    assert (state.health.state, state.health.consecutive_failures) == ("open", 4)
    assert state.health.probe_at == opened_at + timedelta(seconds=30)
    assert await claim(storage, clock.advance(10)) == []  # the late one is held too


async def test_origin_breaker_holds_plain_tasks_in_every_queue(storage: Storage, clock: VirtualClock) -> None:
    for queue in ("plain", "other", "third"):
        await storage.queues.put_queue(queue, QueueConfig(max_concurrency=100), clock.now())
    first = [new(breaker=ORIGIN) for _ in range(3)]
    await storage.tasks.enqueue(in_queue("plain", first), clock.now())
    failed = await claim(storage, clock.now())
    assert [c.breaker for c in failed] == [ORIGIN] * 3
    same_origin = [*in_queue("plain", [new(breaker=ORIGIN)]), *in_queue("other", [new(breaker=ORIGIN)])]
    elsewhere = [*in_queue("plain", [new(breaker=OTHER_ORIGIN)]), *in_queue("other", [new()])]
    await storage.tasks.enqueue(same_origin + elsewhere, clock.now())
    opened_at = clock.now()
    summary = await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in failed], clock.now(), RULES
    )
    assert (summary.accepted, summary.disabled) == (3, ())

    # Other origins' tasks (and tasks without a breaker) still flow; the origin's wait.
    assert {c.id for c in await claim(storage, clock.advance(5))} == {t.id for t in elsewhere}
    while_open = new(breaker=ORIGIN)
    await storage.tasks.enqueue(in_queue("third", [while_open]), clock.now())
    assert await claim(storage, clock.advance(5)) == []
    for held in [*first, *same_origin, while_open]:
        stored = await task(storage, held.id)
        assert stored.status == "ready"
        assert stored.run_at.year == 2030
        assert stored.attempts == (1 if held in first else 0)

    # After the cool-down, one probe; its success frees the rest.
    assert await storage.upkeep.release_probes(opened_at + timedelta(seconds=29)) == 0
    clock.set(opened_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())
    assert probe.id == same_origin[0].id  # the held task due first
    assert await claim(storage, clock.now()) == []
    summary = await storage.dispatch.record_results(
        [outcome(probe, clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert summary.released == 5
    rest = await claim(storage, clock.now())
    assert {c.id for c in rest} == {t.id for t in [*first, same_origin[1], while_open]}


async def test_results_without_an_effect_leave_breakers_alone(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("plain", QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue(in_queue("plain", [new(breaker=ORIGIN) for _ in range(5)]), clock.now())
    claimed = await claim(storage, clock.now())
    # A 500 on one path says nothing about the origin: the dispatcher gives no effect.
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), None) for c in claimed], clock.now(), RULES
    )
    assert len(await claim(storage, clock.advance(1))) == 5


# --- auto-disable, enable, recover -------------------------------------------------------


async def test_gone_disables_the_endpoint(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock)
    await publish(storage, clock)
    waiting = (await publish(storage, clock)).event.deliveries[0].task_id
    [claimed] = await claim(storage, clock.now(), limit=1)
    summary = await storage.dispatch.record_results(
        [outcome(claimed, clock.now(), "gone", "failed", 410)], clock.advance(1), RULES
    )
    assert summary.accepted == 1
    [(disabled_id, reason)] = summary.disabled
    assert disabled_id == created.id
    assert "410" in reason
    state = await health_of(storage, created.id)
    assert not state.enabled
    assert (state.health.state, state.health.disabled_reason) == ("disabled", reason)
    queue = await storage.queues.get_queue(created.id)
    assert queue is not None and queue.config.paused
    assert await claim(storage, clock.advance(60)) == []
    assert (await task(storage, waiting)).status == "ready"  # held by the pause, not failed
    assert (await publish(storage, clock)).event.deliveries == []

    enabled, changed = await storage.webhooks.set_endpoint_enabled(created.id, True, None, clock.now())
    assert changed
    assert enabled.enabled
    assert (enabled.health.state, enabled.health.disabled_reason) == ("healthy", None)
    queue = await storage.queues.get_queue(created.id)
    assert queue is not None and not queue.config.paused
    assert [c.id for c in await claim(storage, clock.now())] == [waiting]
    again, changed_again = await storage.webhooks.set_endpoint_enabled(created.id, True, None, clock.now())
    assert not changed_again
    assert again.enabled


async def test_gone_on_a_plain_task_disables_nothing(storage: Storage, clock: VirtualClock) -> None:
    await storage.tasks.enqueue(in_queue("plain", [new(breaker=ORIGIN)]), clock.now())
    [claimed] = await claim(storage, clock.now())
    summary = await storage.dispatch.record_results(
        [outcome(claimed, clock.now(), "gone", "failed", 410)], clock.now(), RULES
    )
    assert (summary.accepted, summary.disabled) == (1, ())


async def test_failing_for_too_long_disables_the_endpoint(storage: Storage, clock: VirtualClock) -> None:
    rules = BreakerRules(threshold=100, cooldown=30, disable_after=60)
    created = await endpoint(storage, clock)
    for _ in range(3):
        await publish(storage, clock)
    started = clock.now()
    for step, expected in ((0, ()), (30, ())):
        [claimed] = await claim(storage, clock.advance(step), limit=1)
        summary = await storage.dispatch.record_results(
            [outcome(claimed, clock.now(), "fail")], clock.now(), rules
        )
        assert summary.disabled == expected
    assert (await health_of(storage, created.id)).health.failing_since == started
    [claimed] = await claim(storage, clock.advance(30), limit=1)
    summary = await storage.dispatch.record_results(
        [outcome(claimed, clock.now(), "fail")], clock.now(), rules
    )
    [(disabled_id, reason)] = summary.disabled
    assert disabled_id == created.id
    assert "60 seconds" in reason
    state = await health_of(storage, created.id)
    assert (state.enabled, state.health.state, state.health.disabled_reason) == (False, "disabled", reason)
    assert await claim(storage, clock.advance(10)) == []
    # Enabling starts afresh: the next failure does not disable it at once.
    await storage.webhooks.set_endpoint_enabled(created.id, True, None, clock.now())
    [claimed] = await claim(storage, clock.now(), limit=1)
    summary = await storage.dispatch.record_results(
        [outcome(claimed, clock.now(), "fail")], clock.now(), rules
    )
    assert summary.disabled == ()
    assert (await health_of(storage, created.id)).health.failing_since == clock.now()


async def test_disable_and_enable_by_hand(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock)
    waiting = (await publish(storage, clock)).event.deliveries[0].task_id
    disabled, changed = await storage.webhooks.set_endpoint_enabled(
        created.id, False, "maintenance", clock.advance(1)
    )
    assert changed
    assert (disabled.enabled, disabled.health.state, disabled.health.disabled_reason) == (
        False,
        "disabled",
        "maintenance",
    )
    assert disabled.updated_at == clock.now()
    _, changed_again = await storage.webhooks.set_endpoint_enabled(created.id, False, "other", clock.now())
    assert not changed_again
    assert (await health_of(storage, created.id)).health.disabled_reason == "maintenance"
    assert await claim(storage, clock.now()) == []
    await storage.webhooks.set_endpoint_enabled(created.id, True, None, clock.now())
    assert [c.id for c in await claim(storage, clock.now())] == [waiting]


async def test_enabling_resets_the_breaker_and_frees_held_tasks(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    ids, _ = await open_breaker(storage, clock, created.id)
    assert (await health_of(storage, created.id)).health.state == "open"
    await storage.webhooks.set_endpoint_enabled(created.id, False, "by hand", clock.now())
    assert await claim(storage, clock.advance(5)) == []
    enabled, changed = await storage.webhooks.set_endpoint_enabled(created.id, True, None, clock.now())
    assert changed
    assert enabled.health.state == "healthy"
    assert (enabled.health.consecutive_failures, enabled.health.failing_since) == (0, None)
    assert enabled.health.probe_at is None
    assert {c.id for c in await claim(storage, clock.now())} == set(ids)  # at full concurrency again


async def test_recover_makes_recently_failed_deliveries_ready(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_attempts=1))
    old = (await publish(storage, clock)).event.deliveries[0].task_id
    recent = (await publish(storage, clock)).event.deliveries[0].task_id
    succeeded = (await publish(storage, clock)).event.deliveries[0].task_id
    [first] = await claim(storage, clock.now(), limit=1)
    assert first.id == old
    await storage.dispatch.record_results([outcome(first, clock.now(), "fail", "failed")], clock.now(), RULES)
    since = clock.advance(10)
    [second] = await claim(storage, clock.now(), limit=1)
    assert second.id == recent
    await storage.dispatch.record_results(
        [outcome(second, clock.now(), "fail", "failed")], clock.now(), RULES
    )
    [third] = await claim(storage, clock.now(), limit=1)
    assert third.id == succeeded
    await storage.dispatch.record_results(
        [outcome(third, clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )

    assert await storage.webhooks.recover_endpoint(created.id, since, clock.advance(5)) == 1
    recovered = await task(storage, recent)
    assert (recovered.status, recovered.attempts, recovered.run_at) == ("ready", 1, clock.now())
    assert (await task(storage, old)).status == "failed"
    assert (await task(storage, succeeded)).status == "succeeded"
    [again] = await claim(storage, clock.now())
    assert (again.id, again.attempt, again.attempt_base) == (recent, 2, 1)  # numbered on
    assert await storage.webhooks.recover_endpoint(created.id, since, clock.now()) == 0  # it is running now


async def test_recover_touches_only_its_own_endpoint(storage: Storage, clock: VirtualClock) -> None:
    mine = await endpoint(storage, clock, delivery=QueueConfig(max_attempts=1))
    theirs = await endpoint(storage, clock, delivery=QueueConfig(max_attempts=1))
    await publish(storage, clock)
    claimed = await claim(storage, clock.now())
    assert {c.endpoint_id for c in claimed} == {mine.id, theirs.id}
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail", "failed") for c in claimed], clock.now(), RULES
    )
    assert await storage.webhooks.recover_endpoint(mine.id, clock.now(), clock.now()) == 1
    assert {(t.endpoint_id, t.status) for t in await all_tasks(storage)} == {
        (mine.id, "ready"),
        (theirs.id, "failed"),
    }


# --- cancel and retry of held tasks -------------------------------------------------------


async def test_cancel_of_a_held_task_keeps_its_due_time_and_retry_clears_the_hold(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    published_at = clock.now()
    ids, _ = await open_breaker(storage, clock, created.id)
    canceled = await storage.tasks.cancel_task(ids[3], clock.advance(1))
    assert (canceled.status, canceled.run_at) == ("canceled", published_at)
    assert (await task(storage, ids[3])).run_at == published_at
    with pytest.raises(TaskStateConflict):
        await storage.tasks.cancel_task(ids[3], clock.now())

    # The probe goes (the canceled task is not one), succeeds, and frees only the held.
    clock.set(published_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())
    assert probe.id == ids[4]
    summary = await storage.dispatch.record_results(
        [outcome(probe, clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert summary.released == 3
    still = await task(storage, ids[3])
    assert (still.status, still.run_at) == ("canceled", published_at)

    retried = await storage.tasks.retry_task(ids[3], clock.advance(1))
    assert (retried.status, retried.run_at, retried.attempts) == ("ready", clock.now(), 0)
    assert await task(storage, ids[3]) == retried
    assert {c.id for c in await claim(storage, clock.now())} == set(ids[:4])


async def test_retry_of_a_held_task_while_open_is_due_now(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    published_at = clock.now()
    ids, _ = await open_breaker(storage, clock, created.id)
    await storage.tasks.cancel_task(ids[3], clock.now())
    retried = await storage.tasks.retry_task(ids[3], clock.advance(2))
    assert (retried.status, retried.run_at, retried.attempts) == ("ready", clock.now(), 0)
    assert (await task(storage, ids[3])).run_at == clock.now()
    assert await claim(storage, clock.advance(1)) == []  # the open endpoint still gets nothing
    assert (await health_of(storage, created.id)).health.probe_at == published_at + timedelta(seconds=30)


async def test_recovered_deliveries_of_an_open_endpoint_wait_for_the_probe(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100, max_attempts=1))
    opened_at = clock.now()
    ids = [(await publish(storage, clock)).event.deliveries[0].task_id for _ in range(5)]
    failed = await claim(storage, clock.now(), limit=3)
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail", "failed") for c in failed], clock.now(), RULES
    )
    assert (await health_of(storage, created.id)).health.state == "open"
    assert await storage.webhooks.recover_endpoint(created.id, opened_at, clock.advance(1)) == 3
    for task_id in ids[:3]:
        recovered = await task(storage, task_id)
        assert (recovered.status, recovered.attempts, recovered.run_at) == ("ready", 1, clock.now())
    assert await claim(storage, clock.advance(5)) == []
    clock.set(opened_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())
    assert probe.id == ids[3]  # the probe, not a recovered task: they wait for it too
    summary = await storage.dispatch.record_results(
        [outcome(probe, clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert summary.released == 4
    assert {c.id for c in await claim(storage, clock.now())} == {*ids[:3], ids[4]}


async def test_a_result_for_a_deleted_endpoint_is_recorded_quietly(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock)
    kept = await endpoint(storage, clock)
    for _ in range(3):
        await publish(storage, clock)
    claimed = await claim(storage, clock.now())
    assert len(claimed) == 6
    await storage.webhooks.delete_endpoint(created.id, clock.now())
    # Its deliveries answered 410 and failed: nothing to disable, no breaker to move, and
    # the other endpoint's results in the same batch count as usual.
    results = [
        outcome(c, clock.now(), "gone", "failed", 410)
        if c.endpoint_id == created.id
        else outcome(c, clock.now(), "fail")
        for c in claimed
    ]
    summary = await storage.dispatch.record_results(results, clock.now(), RULES)
    assert (summary.accepted, summary.stale, summary.disabled) == (3, 3, ())
    assert await storage.webhooks.get_endpoint(created.id) is None
    assert (await health_of(storage, kept.id)).health.state == "open"
    # No breaker was left behind under its id.
    again = await storage.webhooks.create_endpoint(created.id, spec(), clock.now())
    assert (again.health.state, again.health.consecutive_failures) == ("healthy", 0)


async def test_a_canceled_probe_is_replaced(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    opened_at = clock.now()
    ids, _ = await open_breaker(storage, clock, created.id)
    clock.set(opened_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    canceled = await storage.tasks.cancel_task(ids[3], clock.now())  # the probe, before any claim
    assert canceled.run_at == clock.now()
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())
    assert probe.id == ids[4]
    assert await claim(storage, clock.now()) == []


async def test_results_without_an_effect_leave_endpoint_health_alone(
    storage: Storage, clock: VirtualClock
) -> None:
    """The plain helper's results carry no effect: an endpoint's health does not move."""
    created = await endpoint(storage, clock)
    await publish(storage, clock)
    [claimed] = await claim(storage, clock.now())
    await storage.dispatch.record_results(
        [result_for(claimed, clock.now(), "retry", 500, retry_in=1)], clock.now(), RULES
    )
    assert (await health_of(storage, created.id)).health.state == "healthy"


async def test_tasks_back_to_ready_behind_an_open_breaker_are_held(
    storage: Storage, clock: VirtualClock
) -> None:
    """A retry with no say about the breaker, a reaped task and a manual retry all wait for
    an open breaker, as a new task does: none of them slips past it."""
    await storage.queues.put_queue("plain", QueueConfig(max_concurrency=100, timeout=1.0), clock.now())
    tasks = [new(breaker=ORIGIN) for _ in range(6)]
    await storage.tasks.enqueue(in_queue("plain", tasks), clock.now())
    running = {c.id: c for c in await claim(storage, clock.now())}
    first = [running[t.id] for t in tasks[:3]]
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in first], clock.now(), RULES
    )
    no_say, to_reap, finished = (running[t.id] for t in tasks[3:])
    await storage.dispatch.record_results(
        [outcome(no_say, clock.now(), None), outcome(finished, clock.now(), None, "failed")],
        clock.now(),
        RULES,
    )
    retried = await storage.tasks.retry_task(finished.id, clock.now())
    assert (retried.status, retried.run_at) == ("ready", clock.now())
    assert await storage.upkeep.reap_expired(clock.advance(MARGIN + 2)) == 1
    assert await claim(storage, clock.advance(5)) == []  # all six wait for the probe
    for held in (no_say, to_reap, finished):
        stored = await task(storage, held.id)
        assert stored.status == "ready" and stored.run_at < HELD_UNTIL


async def test_summaries_count_breakers_opening_and_closing(storage: Storage, clock: VirtualClock) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    opened_at = clock.now()
    for _ in range(4):
        await publish(storage, clock)
    failed = await claim(storage, clock.now(), limit=3)
    summary = await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in failed], clock.now(), RULES
    )
    assert (summary.opened, summary.closed) == (1, 0)
    clock.set(opened_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())
    summary = await storage.dispatch.record_results([outcome(probe, clock.now(), "fail")], clock.now(), RULES)
    assert (summary.opened, summary.closed) == (0, 0)  # reopened: no change of state
    clock.set(opened_at + timedelta(seconds=90))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())
    summary = await storage.dispatch.record_results(
        [outcome(probe, clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert (summary.opened, summary.closed, summary.released) == (0, 1, 3)
    assert (await storage.webhooks.count_endpoints_by_state()) == {"healthy": 1}
    await storage.webhooks.set_endpoint_enabled(created.id, False, "by hand", clock.now())
    assert (await storage.webhooks.count_endpoints_by_state()) == {"disabled": 1}


async def test_enabling_an_enabled_endpoint_resets_its_open_breaker(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    ids, _ = await open_breaker(storage, clock, created.id)
    _, changed = await storage.webhooks.set_endpoint_enabled(created.id, True, None, clock.advance(1))
    assert not changed
    assert (await health_of(storage, created.id)).health.state == "healthy"
    assert {c.id for c in await claim(storage, clock.advance(2))} == set(ids)


async def test_events_are_pruned_once_no_delivery_is_kept(storage: Storage, clock: VirtualClock) -> None:
    await endpoint(storage, clock, event_types=("invoice.*",))
    delivered = (await publish(storage, clock)).event
    unmatched = (await publish(storage, clock, "user.created")).event
    kept = (await publish(storage, clock)).event
    claimed = {c.id: c for c in await claim(storage, clock.now())}
    first, third = claimed[delivered.deliveries[0].task_id], claimed[kept.deliveries[0].task_id]
    results = [
        outcome(first, clock.now(), "ok", "succeeded", 200),
        outcome(third, clock.now(), "fail", "failed"),
    ]
    await storage.dispatch.record_results(results, clock.now(), RULES)
    later = clock.advance(3600)
    assert await storage.retention.prune_events(later) == 1  # the unmatched one: no delivery to wait for
    assert await storage.retention.prune_succeeded(later) == 1
    assert await storage.retention.prune_events(later) == 1  # its delivery is gone now
    assert (
        await storage.webhooks.get_event(unmatched.id) is None
        and await storage.webhooks.get_event(delivered.id) is None
    )
    assert await storage.webhooks.get_event(kept.id) is not None  # its failed delivery is kept, so is it


async def test_the_probe_of_an_ordering_key_endpoint_is_a_key_head(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100, ordering="key"))
    heads = [(await publish(storage, clock, key=k)).event.deliveries[0].task_id for k in ("a", "b", "c")]
    behind = (await publish(storage, clock, key="a")).event.deliveries[0].task_id  # due first of the held
    failed = await claim(storage, clock.now())
    assert {c.id for c in failed} == set(heads)
    opened_at = clock.now()
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail", retry_in=1) for c in failed], clock.now(), RULES
    )
    clock.set(opened_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())  # claimable: a head, never the task behind one
    assert probe.id in heads
    await storage.dispatch.record_results(
        [outcome(probe, clock.now(), "ok", "succeeded", 200)], clock.now(), RULES
    )
    assert (await health_of(storage, created.id)).health.state == "healthy"
    # The rest flow, in key order: `behind` only once its head, key "a"'s first, is done.
    rest = {h for h in heads if h != probe.id} | ({behind} if probe.id == heads[0] else set())
    assert {c.id for c in await claim(storage, clock.now())} == rest


async def test_no_probe_is_released_into_a_paused_queue(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("a", QueueConfig(max_concurrency=100), clock.now())
    await storage.queues.put_queue("b", QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue(in_queue("a", [new(breaker=ORIGIN)]), clock.now())  # due first, then paused
    failing = in_queue("b", [new(breaker=ORIGIN) for _ in range(3)])
    await storage.tasks.enqueue(failing, clock.advance(1))
    await storage.queues.update_queue("a", lambda c: replace(c, paused=True), clock.now())
    claimed = await claim(storage, clock.now())
    waiting_b = in_queue("b", [new(breaker=ORIGIN)])
    await storage.tasks.enqueue(waiting_b, clock.now())
    opened_at = clock.now()
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), "fail") for c in claimed], clock.now(), RULES
    )
    clock.set(opened_at + timedelta(seconds=30))
    assert await storage.upkeep.release_probes(clock.now()) == 1
    [probe] = await claim(storage, clock.now())
    assert probe.queue == "b"


async def test_recover_and_retry_deliver_to_the_endpoint_url_of_now(
    storage: Storage, clock: VirtualClock
) -> None:
    created = await endpoint(storage, clock, delivery=QueueConfig(max_concurrency=100))
    since = clock.now()
    ids = [(await publish(storage, clock)).event.deliveries[0].task_id for _ in range(2)]
    claimed = await claim(storage, clock.now())
    await storage.dispatch.record_results(
        [outcome(c, clock.now(), None, "failed", 404) for c in claimed], clock.now(), RULES
    )
    fixed = "http://127.0.0.1:9/fixed"
    await storage.webhooks.update_endpoint(created.id, lambda s: replace(s, url=fixed), clock.advance(1))
    assert (await task(storage, ids[0])).url == URL  # a finished delivery keeps its record
    assert (await storage.tasks.retry_task(ids[0], clock.now())).url == fixed
    assert await storage.webhooks.recover_endpoint(created.id, since, clock.now()) == 1
    assert (await task(storage, ids[1])).url == fixed
