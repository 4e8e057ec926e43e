"""The storage contract, deletes (docs/retention.md): a task goes with its attempts and the
callbacks made of it; an event with its deliveries and theirs; never while running."""

from __future__ import annotations

import pytest

from tests.storage.helpers import URL, new, result_for, token
from tests.support.clock import VirtualClock
from workly.callbacks import CALLBACK_QUEUE
from workly.errors import DeliveryInFlight, EventNotFound, TaskInFlight, TaskNotFound
from workly.ids import new_id, new_task_id
from workly.models import QueueConfig
from workly.storage.contract import Storage
from workly.webhooks import EndpointSpec, NewEvent


async def test_a_task_goes_with_its_attempts_and_callbacks(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_attempts=1), clock.now())
    task, other = new(), new()
    await storage.tasks.enqueue([task, other], clock.now())
    claimed = (await storage.dispatch.claim_tasks(10, clock.now(), token(), 30)).tasks
    await storage.dispatch.record_results(
        [result_for(c, clock.now(), "failed", 500) for c in claimed], clock.now()
    )
    callback = new(queue=CALLBACK_QUEUE, callback_of=task.id)
    others_callback = new(queue=CALLBACK_QUEUE, callback_of=other.id)
    await storage.tasks.enqueue([callback, others_callback], clock.now())
    assert len(await storage.tasks.list_attempts(task.id)) == 1

    await storage.tasks.delete_task(task.id)
    assert await storage.tasks.get_task(task.id) is None
    assert await storage.tasks.get_task(callback.id) is None
    assert await storage.tasks.get_task(other.id) is not None
    assert await storage.tasks.get_task(others_callback.id) is not None
    with pytest.raises(TaskNotFound):
        await storage.tasks.list_attempts(task.id)
    with pytest.raises(TaskNotFound):
        await storage.tasks.delete_task(task.id)
    queue = await storage.queues.get_queue("q")
    assert queue is not None and queue.counts["failed"] == 1


async def test_a_running_task_stays(storage: Storage, clock: VirtualClock) -> None:
    task = new()
    await storage.tasks.enqueue([task], clock.now())
    await storage.dispatch.claim_tasks(10, clock.now(), token(), 30)
    with pytest.raises(TaskInFlight, match="being sent"):
        await storage.tasks.delete_task(task.id)
    stored = await storage.tasks.get_task(task.id)
    assert stored is not None and stored.status == "running"


async def test_an_event_goes_with_its_deliveries(storage: Storage, clock: VirtualClock) -> None:
    for _ in range(3):
        await storage.webhooks.create_endpoint(new_id("ep"), EndpointSpec(url=URL), clock.now())
    doomed, kept = (
        NewEvent(id=new_id("evt"), type="a.b", payload=b"{}", content_type="application/json")
        for _ in range(2)
    )
    published = await storage.webhooks.publish(doomed, clock.now(), new_task_id)
    await storage.webhooks.publish(kept, clock.now(), new_task_id)
    delivery = published.event.deliveries[0].task_id
    callback = new(queue=CALLBACK_QUEUE, callback_of=delivery)
    await storage.tasks.enqueue([callback], clock.now())

    assert await storage.webhooks.delete_event(doomed.id) == 3
    assert await storage.webhooks.get_event(doomed.id) is None
    assert all([await storage.tasks.get_task(d.task_id) is None for d in published.event.deliveries])
    assert await storage.tasks.get_task(callback.id) is None
    stored = await storage.webhooks.get_event(kept.id)
    assert stored is not None and len(stored.deliveries) == 3
    with pytest.raises(EventNotFound):
        await storage.webhooks.delete_event(doomed.id)


async def test_an_event_with_a_delivery_in_flight_stays(storage: Storage, clock: VirtualClock) -> None:
    await storage.webhooks.create_endpoint(new_id("ep"), EndpointSpec(url=URL), clock.now())
    event = NewEvent(id=new_id("evt"), type="a.b", payload=b"{}", content_type="application/json")
    await storage.webhooks.publish(event, clock.now(), new_task_id)
    [running] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), 30)).tasks
    with pytest.raises(DeliveryInFlight) as refused:
        await storage.webhooks.delete_event(event.id)
    assert refused.value.task_id == running.id
    stored = await storage.webhooks.get_event(event.id)
    assert stored is not None and [d.task_id for d in stored.deliveries] == [running.id]
