"""The storage contract of the event catalogue (CatalogueStore) and of replays (an operation
with action ``replay``): the same semantics on SQLite and on PostgreSQL, on the injected
clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.storage.helpers import token
from tests.support.clock import VirtualClock
from workly.errors import EndpointNotFound, EventTypeNotFound, ReplayRunning
from workly.event_filter import compile_filter
from workly.event_types import EventTypeSpec
from workly.ids import new_id, new_task_id
from workly.operations import TaskFilter
from workly.storage.contract import Storage
from workly.webhooks import EndpointSpec, NewEvent

LEASE = 15.0
SCHEMA = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}


async def test_an_event_type_is_put_changed_listed_and_deleted(storage: Storage, clock: VirtualClock) -> None:
    catalogue = storage.catalogue
    spec = EventTypeSpec(description="paid", schema=SCHEMA, examples=({"b": 1, "a": "x"},))
    made, created = await catalogue.put_event_type("invoice.paid", spec, clock.now())
    assert created and made.version == 1 and made.spec == spec
    assert list(made.spec.schema["properties"]) == ["b", "a"]  # type: ignore[index]  # as given
    clock.advance(1)
    replaced, created = await catalogue.put_event_type(
        "invoice.paid", replace(spec, deprecated=True), clock.now()
    )
    assert not created and replaced.version == 2 and replaced.created_at == made.created_at
    assert replaced.updated_at == made.updated_at + timedelta(seconds=1)
    changed = await catalogue.update_event_type(
        "invoice.paid", lambda current: replace(current, description="changed"), clock.now()
    )
    assert changed.version == 3 and changed.spec.description == "changed" and changed.spec.deprecated
    with pytest.raises(EventTypeNotFound):
        await catalogue.update_event_type("nope", lambda current: current, clock.now())
    await catalogue.put_event_type("user.created", EventTypeSpec(), clock.now())
    shown, _ = await catalogue.list_event_types(False, 10, None)
    assert [t.type for t in shown] == ["user.created"]
    everything, _ = await catalogue.list_event_types(True, 1, None)
    assert [t.type for t in everything] == ["user.created"]
    assert await catalogue.catalogue_types() == ["invoice.paid", "user.created"]
    assert await catalogue.get_event_type("invoice.paid") == changed
    await catalogue.delete_event_type("invoice.paid")
    assert await catalogue.get_event_type("invoice.paid") is None
    with pytest.raises(EventTypeNotFound):
        await catalogue.delete_event_type("invoice.paid")


async def test_a_failing_change_changes_nothing(storage: Storage, clock: VirtualClock) -> None:
    await storage.catalogue.put_event_type("a.b", EventTypeSpec(description="kept"), clock.now())

    def refuse(current: EventTypeSpec) -> EventTypeSpec:
        raise ValueError("refused by the change")

    with pytest.raises(ValueError, match="refused by the change"):
        await storage.catalogue.update_event_type("a.b", refuse, clock.now())
    found = await storage.catalogue.get_event_type("a.b")
    assert found is not None and found.version == 1 and found.spec.description == "kept"


async def _publish(
    storage: Storage, clock: VirtualClock, count: int, tenant: str | None, **labels: str
) -> list[str]:
    ids = []
    for n in range(count):
        event = NewEvent(new_id("evt"), "order.placed", f'{{"n":{n}}}'.encode(), "application/json",
                         tenant=tenant, labels=dict(labels) or None)  # fmt: skip
        await storage.webhooks.publish(event, clock.now(), new_task_id)
        ids.append(event.id)
    return ids


async def _endpoint(storage: Storage, clock: VirtualClock, tenant: str | None, **filter_: str) -> str:
    spec = EndpointSpec(
        url="http://127.0.0.1:9/", tenant=tenant, filter=compile_filter(filter_) if filter_ else None
    )
    return (await storage.webhooks.create_endpoint(new_id("ep"), spec, clock.now())).id


async def _delivered_events(storage: Storage, endpoint_id: str) -> list[str | None]:
    tasks, _ = await storage.tasks.list_tasks(endpoint_id, None, 500, None)
    return sorted(task.event_id for task in tasks if task.event_id is not None)


async def test_a_replay_goes_in_chunks_resumes_after_a_lost_lease_and_never_delivers_twice(
    storage: Storage, clock: VirtualClock
) -> None:
    since = clock.now()
    eu = await _publish(storage, clock, 7, "acme", region="eu")
    await _publish(storage, clock, 3, "acme", region="us")
    await _publish(storage, clock, 4, "globex", region="eu")  # another tenant's
    endpoint = await _endpoint(storage, clock, "acme", **{"labels.region": "eu"})
    created = await storage.operations.create_operation(
        new_id("op"), "replay", TaskFilter(endpoint_id=endpoint, created_after=since), clock.now()
    )
    assert (created.action, created.matched, created.state) == ("replay", 10, "running")
    with pytest.raises(ReplayRunning):
        await storage.operations.create_operation(
            new_id("op"), "replay", TaskFilter(endpoint_id=endpoint, created_after=since), clock.now()
        )
    first = token()
    assert await storage.operations.take_operation(clock.now(), first, LEASE) is not None
    done = await storage.operations.run_operation_chunk(created.id, first, clock.now(), LEASE, 4)
    assert done is not None and done.operation.state == "running"
    progressed = done.operation.changed + done.operation.skipped
    assert progressed == 4
    # Its process dies: the lease runs out, another runner takes over where it stopped.
    clock.advance(LEASE + 1)
    second = token()
    assert await storage.operations.take_operation(clock.now(), second, LEASE) is not None
    assert await storage.operations.run_operation_chunk(created.id, first, clock.now(), LEASE, 4) is None
    while done is not None and done.operation.state == "running":
        done = await storage.operations.run_operation_chunk(created.id, second, clock.now(), LEASE, 4)
    assert done is not None
    final = done.operation
    assert (final.state, final.matched, final.changed, final.skipped) == ("succeeded", 10, 7, 3)
    assert await _delivered_events(storage, endpoint) == sorted(eu)
    again = await storage.operations.create_operation(
        new_id("op"), "replay", TaskFilter(endpoint_id=endpoint, created_after=since), clock.now()
    )
    third = token()
    assert await storage.operations.take_operation(clock.now(), third, LEASE) is not None
    repeat = await storage.operations.run_operation_chunk(again.id, third, clock.now(), LEASE, 100)
    assert repeat is not None and (repeat.operation.changed, repeat.operation.skipped) == (0, 10)
    assert await _delivered_events(storage, endpoint) == sorted(eu)


async def test_a_replay_looks_only_since_its_time_and_fails_when_its_endpoint_goes(
    storage: Storage, clock: VirtualClock
) -> None:
    await _publish(storage, clock, 3, None)
    clock.advance(60)
    since = clock.now()
    later = await _publish(storage, clock, 2, None)
    endpoint = await _endpoint(storage, clock, None)
    with pytest.raises(EndpointNotFound):
        await storage.operations.create_operation(
            new_id("op"), "replay", TaskFilter(endpoint_id="ep_gone", created_after=since), clock.now()
        )
    created = await storage.operations.create_operation(
        new_id("op"), "replay", TaskFilter(endpoint_id=endpoint, created_after=since), clock.now()
    )
    assert created.matched == 2
    lease = token()
    assert await storage.operations.take_operation(clock.now(), lease, LEASE) is not None
    await storage.webhooks.delete_endpoint(endpoint, clock.now())
    done = await storage.operations.run_operation_chunk(created.id, lease, clock.now(), LEASE, 100)
    assert done is not None and done.operation.state == "failed" and "deleted" in (done.operation.error or "")
    assert later  # published after since: what the replay would have covered
