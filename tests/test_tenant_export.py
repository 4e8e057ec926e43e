"""A tenant's export (service/export.py) over both backends: every row of the tenant once and
nothing of another, read a page at a time: the memory it holds does not grow with the
tenant (docs/retention.md)."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter

import pytest

from tests.storage.helpers import URL, new, result_for, token
from tests.support.clock import VirtualClock
from workly.errors import TenantNotFound
from workly.ids import new_id, new_task_id
from workly.models import Attempt, QueueConfig, Task
from workly.service.export import TenantExport
from workly.storage.contract import Storage
from workly.tenants import TenantSpec
from workly.webhooks import Endpoint, EndpointSpec, Event, NewEvent

TENANT, OTHER = "exported", "not-exported"
FAST = QueueConfig(max_concurrency=10_000, max_attempts=3)


async def fill(
    storage: Storage, clock: VirtualClock, tenant: str, events: int, plain: int
) -> dict[str, set[str]]:
    """The tenant's endpoints, events (with deliveries, some tried), plain tasks and a test
    delivery; the ids of each kind."""
    await storage.tenants.put_tenant(tenant, TenantSpec(), clock.now())
    ids: dict[str, set[str]] = {"endpoint": set(), "event": set(), "task": set()}
    for _ in range(2):
        spec = EndpointSpec(url=URL, tenant=tenant, delivery=FAST)
        ids["endpoint"].add((await storage.webhooks.create_endpoint(new_id("ep"), spec, clock.now())).id)
    for n in range(events):
        payload = json.dumps({"n": n, "padding": "x" * 400}).encode()
        event = NewEvent(new_id("evt"), "invoice.paid", payload, "application/json", tenant=tenant)
        published = await storage.webhooks.publish(event, clock.now(), new_task_id)
        ids["event"].add(event.id)
        ids["task"] |= {d.task_id for d in published.event.deliveries}
    tasks = [new(tenant=tenant, body=b"y" * 400) for _ in range(plain)]
    await storage.tasks.enqueue(tasks, clock.now())
    ids["task"] |= {task.id for task in tasks}
    test = new_task_id()
    await storage.webhooks.add_test_delivery(sorted(ids["endpoint"])[0], test, b"{}", {}, clock.now())
    ids["task"].add(test)
    claimed = (await storage.dispatch.claim_tasks(events, clock.now(), token(), 30)).tasks
    await storage.dispatch.record_results(
        [result_for(c, clock.now(), "retry", 500, 60) for c in claimed], clock.now()
    )
    return ids


async def with_attempts(storage: Storage, ids: dict[str, set[str]]) -> set[str]:
    """Every id the export of ``ids``' tenant must yield once: its attempts as stored now."""
    attempts = {f"{a.task_id}#{a.attempt}" for t in ids["task"] for a in await storage.tasks.list_attempts(t)}
    assert attempts  # some were tried
    return {f"{kind}:{one}" for kind, many in {**ids, "attempt": attempts}.items() for one in many}


async def exported(export: TenantExport, tenant: str, operators: bool = True) -> tuple[Counter[str], int]:
    """The ids of what the export yields (counted, so a repeat shows) and the peak memory
    traced while it ran."""
    seen: Counter[str] = Counter()
    tracemalloc.start()
    try:
        async for kind, item in await export.items(tenant, operators):
            if isinstance(item, (Endpoint, Event, Task)):
                assert kind == {Endpoint: "endpoint", Event: "event", Task: "task"}[type(item)]
                seen[f"{kind}:{item.id}"] += 1
            else:
                assert kind == "attempt" and isinstance(item, Attempt)
                seen[f"attempt:{item.task_id}#{item.attempt}"] += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return seen, peak


async def test_every_row_of_the_tenant_once_and_none_of_another(
    storage: Storage, clock: VirtualClock
) -> None:
    ids = await fill(storage, clock, TENANT, events=60, plain=25)
    await fill(storage, clock, OTHER, events=10, plain=5)
    seen, _ = await exported(
        TenantExport(storage.tenants, storage.webhooks, storage.export, events_page=7, tasks_page=5), TENANT
    )
    assert set(seen.values()) == {1}  # nothing twice
    assert set(seen) == await with_attempts(storage, ids)


async def test_the_memory_an_export_holds_does_not_grow_with_the_tenant(
    storage: Storage, clock: VirtualClock
) -> None:
    small_ids = await fill(storage, clock, "small", events=100, plain=20)
    large_ids = await fill(storage, clock, TENANT, events=1000, plain=200)
    export = TenantExport(storage.tenants, storage.webhooks, storage.export, events_page=50, tasks_page=50)
    small, small_peak = await exported(export, "small")
    large, large_peak = await exported(export, TENANT)
    assert set(small) == await with_attempts(storage, small_ids)
    assert set(large) == await with_attempts(storage, large_ids)
    # Ten times the rows, not ten times the memory: a page at a time (a whole-tenant read
    # of the large one would hold well over 1 MB of payloads and bodies alone).
    assert large_peak < 3 * small_peak, (small_peak, large_peak)


async def test_the_tenants_own_key_gets_no_plain_task_or_test_delivery(
    storage: Storage, clock: VirtualClock
) -> None:
    """What its own key may read through the API: not the operator's plain tasks that carry its
    name, nor test deliveries (their headers may hold the operator's credentials)."""
    ids = await fill(storage, clock, TENANT, events=20, plain=10)
    export = TenantExport(storage.tenants, storage.webhooks, storage.export, events_page=7, tasks_page=5)
    seen, _ = await exported(export, TENANT, operators=False)
    everything = await with_attempts(storage, ids)
    plain = {t.id for t in (await storage.tasks.list_tasks("q", None, 100, None))[0]}
    tests = {f"task:{t}" for t in ids["task"] if (await storage.tasks.get_task(t)).test}  # type: ignore[union-attr]
    assert tests and plain
    assert set(seen) == {i for i in everything if i.split(":")[1].split("#")[0] not in plain} - tests


async def test_an_unknown_tenant_has_no_export(storage: Storage, clock: VirtualClock) -> None:
    with pytest.raises(TenantNotFound):
        await TenantExport(storage.tenants, storage.webhooks, storage.export).items("nobody")
