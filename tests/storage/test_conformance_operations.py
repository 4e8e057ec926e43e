"""The storage contract for failure handling: bulk operations (chunks, filters, skipped
counts, resumption after a crash between chunks) and due callbacks. Every test runs on
SQLite and on PostgreSQL, on the injected clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.storage.helpers import in_queue, new, result_for, token
from tests.support.clock import VirtualClock
from workly.ids import new_id, new_task_id
from workly.models import NewTask, QueueConfig
from workly.operations import Action, Operation, TaskFilter
from workly.storage.contract import Storage
from workly.webhooks import EndpointSpec, NewEvent

MARGIN = 30.0
LEASE = 15.0


async def fail_all(
    storage: Storage, clock: VirtualClock, tasks: list[NewTask], status_code: int = 500
) -> None:
    """Store ``tasks`` and fail each at its first attempt with ``status_code``."""
    for queue in {t.queue for t in tasks}:
        if await storage.queues.get_queue(queue) is None:
            await storage.queues.put_queue(queue, QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue(tasks, clock.now())
    claimed = (await storage.dispatch.claim_tasks(len(tasks) + 10, clock.now(), token(), MARGIN)).tasks
    assert len(claimed) == len(tasks)
    await storage.dispatch.record_results(
        [result_for(c, clock.now(), "failed", status_code) for c in claimed], clock.now()
    )


async def run_to_end(
    storage: Storage, clock: VirtualClock, action: Action, task_filter: TaskFilter, chunk: int = 1000
) -> Operation:
    created = await storage.operations.create_operation(new_id("op"), action, task_filter, clock.now())
    lease = token()
    taken = await storage.operations.take_operation(clock.now(), lease, LEASE)
    assert taken is not None and taken.id == created.id
    while True:
        done = await storage.operations.run_operation_chunk(created.id, lease, clock.now(), LEASE, chunk)
        assert done is not None
        if done.operation.state != "running":
            return done.operation


async def statuses(storage: Storage, ids: list[str]) -> list[str]:
    found = [await storage.tasks.get_task(task_id) for task_id in ids]
    return [task.status if task is not None else "gone" for task in found]


async def test_a_bulk_retry_goes_in_chunks_and_counts_what_it_skipped(
    storage: Storage, clock: VirtualClock
) -> None:
    failed = in_queue("q", [new(max_attempts=1) for _ in range(5)])
    await fail_all(storage, clock, failed)
    [ready] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [elsewhere] = await storage.tasks.enqueue(in_queue("other", [new()]), clock.now())
    created = await storage.operations.create_operation(
        new_id("op"), "retry", TaskFilter(queue="q"), clock.now()
    )
    assert (created.state, created.matched, created.changed, created.skipped) == ("running", 6, 0, 0)
    assert await statuses(storage, [t.id for t in failed]) == ["failed"] * 5  # nothing before it runs

    lease = token()
    assert await storage.operations.take_operation(clock.now(), lease, LEASE) is not None
    assert await storage.operations.take_operation(clock.now(), token(), LEASE) is None  # held
    first = await storage.operations.run_operation_chunk(created.id, lease, clock.advance(1), LEASE, 4)
    assert first is not None
    assert (first.changed, first.operation.changed, first.operation.state) == (4, 4, "running")
    second = await storage.operations.run_operation_chunk(created.id, lease, clock.advance(1), LEASE, 4)
    assert second is not None
    final = second.operation
    assert (final.state, final.matched, final.changed, final.skipped) == ("succeeded", 6, 5, 1)
    assert final.finished_at == clock.now()
    assert await statuses(storage, [t.id for t in failed]) == ["ready"] * 5
    assert await statuses(storage, [ready.task.id, elsewhere.task.id]) == ["ready", "ready"]
    # Redriven as retry_task does it: attempts numbered on, due now, a fresh budget.
    claimed = {c.id: c for c in (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks}
    assert (claimed[failed[0].id].attempt, claimed[failed[0].id].attempt_base) == (2, 1)
    # A finished operation is no longer anyone's to run.
    assert await storage.operations.run_operation_chunk(created.id, lease, clock.now(), LEASE, 4) is None
    stored = await storage.operations.get_operation(created.id)
    assert stored == final


async def test_an_operation_resumes_after_a_crash_between_chunks(
    storage: Storage, clock: VirtualClock
) -> None:
    failed = in_queue("q", [new(max_attempts=1) for _ in range(7)])
    await fail_all(storage, clock, failed)
    created = await storage.operations.create_operation(
        new_id("op"), "retry", TaskFilter(status="failed"), clock.now()
    )
    crashed = token()
    assert await storage.operations.take_operation(clock.now(), crashed, LEASE) is not None
    first = await storage.operations.run_operation_chunk(created.id, crashed, clock.now(), LEASE, 3)
    assert first is not None and first.changed == 3
    # The process dies here. Until its lease expires, nobody else takes the operation.
    assert await storage.operations.take_operation(clock.advance(LEASE - 1), token(), LEASE) is None
    resumed = token()
    taken = await storage.operations.take_operation(clock.advance(2), resumed, LEASE)
    assert taken is not None and (taken.id, taken.changed) == (created.id, 3)
    # The dead process's lease is gone: a late chunk of its would change nothing.
    assert await storage.operations.run_operation_chunk(created.id, crashed, clock.now(), LEASE, 3) is None
    changed = [first.changed]
    while True:
        done = await storage.operations.run_operation_chunk(created.id, resumed, clock.now(), LEASE, 3)
        assert done is not None
        changed.append(done.changed)
        if done.operation.state != "running":
            break
    assert changed == [3, 3, 1]  # every task exactly once
    final = done.operation
    assert (final.matched, final.changed, final.skipped) == (7, 7, 0)
    assert await statuses(storage, [t.id for t in failed]) == ["ready"] * 7
    for task_id in (t.id for t in failed):
        stored = await storage.tasks.get_task(task_id)
        assert stored is not None and stored.attempts == 1  # redriven once: not twice


async def test_a_released_operation_is_taken_at_once_by_another_runner(
    storage: Storage, clock: VirtualClock
) -> None:
    await fail_all(storage, clock, in_queue("q", [new(max_attempts=1) for _ in range(3)]))
    created = await storage.operations.create_operation(
        new_id("op"), "retry", TaskFilter(queue="q"), clock.now()
    )
    stopping = token()
    await storage.operations.take_operation(clock.now(), stopping, LEASE)
    assert (
        await storage.operations.run_operation_chunk(created.id, stopping, clock.now(), LEASE, 2) is not None
    )
    assert (
        await storage.operations.release_operation(created.id, token()) is False
    )  # not another's to release
    assert await storage.operations.release_operation(created.id, stopping) is True
    resumed = token()
    taken = await storage.operations.take_operation(clock.now(), resumed, LEASE)  # no waiting for the lease
    assert taken is not None and taken.changed == 2
    assert await storage.operations.run_operation_chunk(created.id, stopping, clock.now(), LEASE, 2) is None
    done = await storage.operations.run_operation_chunk(created.id, resumed, clock.now(), LEASE, 2)
    assert done is not None and (done.operation.state, done.operation.changed) == ("succeeded", 3)
    assert (
        await storage.operations.release_operation(created.id, resumed) is False
    )  # finished: nothing to give back


async def test_tasks_stored_after_the_operation_are_not_its_business(
    storage: Storage, clock: VirtualClock
) -> None:
    await fail_all(storage, clock, in_queue("q", [new(max_attempts=1)]))
    created = await storage.operations.create_operation(
        new_id("op"), "cancel", TaskFilter(queue="q"), clock.now()
    )
    [later] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    lease = token()
    await storage.operations.take_operation(clock.now(), lease, LEASE)
    done = await storage.operations.run_operation_chunk(created.id, lease, clock.now(), LEASE)
    assert done is not None
    assert (done.operation.matched, done.operation.changed, done.operation.skipped) == (1, 0, 1)
    assert await statuses(storage, [later.task.id]) == ["ready"]


async def test_a_bulk_cancel_cancels_ready_tasks_and_skips_the_rest(
    storage: Storage, clock: VirtualClock
) -> None:
    ready = await storage.tasks.enqueue(
        in_queue("q", [new(), new(run_at=clock.now() + timedelta(days=1))]), clock.now()
    )
    [running] = await storage.tasks.enqueue(in_queue("q", [new(priority=10)]), clock.now())
    await storage.dispatch.claim_tasks(1, clock.now(), token(), MARGIN)
    final = await run_to_end(storage, clock, "cancel", TaskFilter(queue="q"))
    assert (final.matched, final.changed, final.skipped) == (3, 2, 1)
    assert await statuses(storage, [e.task.id for e in ready]) == ["canceled", "canceled"]
    assert await statuses(storage, [running.task.id]) == ["running"]


async def test_filters_each_narrow_what_is_changed(storage: Storage, clock: VirtualClock) -> None:
    start = clock.now()
    plain = in_queue("q", [new(max_attempts=1, tenant="acme", key="k1")])
    await fail_all(storage, clock, plain, status_code=503)
    clock.advance(60)
    other = in_queue("q", [new(max_attempts=1, tenant="globex", key="k2")])
    await fail_all(storage, clock, other, status_code=404)
    endpoint = await storage.webhooks.create_endpoint(
        new_id("ep"), EndpointSpec(url="http://127.0.0.1:9/"), clock.now()
    )
    event = NewEvent(id=new_id("evt"), type="invoice.paid", payload=b"{}", content_type="application/json")
    published = await storage.webhooks.publish(event, clock.now(), new_task_id)
    assert published is not None
    [delivery] = published.event.deliveries
    claimed = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results(
        [result_for(c, clock.now(), "failed", 500) for c in claimed], clock.now()
    )
    ids = [plain[0].id, other[0].id, delivery.task_id]
    codes = {plain[0].id: 503, other[0].id: 404, delivery.task_id: 500}

    cases: list[tuple[TaskFilter, list[str]]] = [
        (TaskFilter(tenant="acme"), [plain[0].id]),
        (TaskFilter(key="k2"), [other[0].id]),
        (TaskFilter(last_status_code=404), [other[0].id]),
        (TaskFilter(endpoint_id=endpoint.id), [delivery.task_id]),
        (TaskFilter(event_type="invoice.paid"), [delivery.task_id]),
        (TaskFilter(event_type="invoice.voided"), []),
        (TaskFilter(created_before=start + timedelta(seconds=30)), [plain[0].id]),
        (TaskFilter(created_after=start + timedelta(seconds=30), queue="q"), [other[0].id]),
        (TaskFilter(queue=endpoint.id, status="failed"), [delivery.task_id]),
    ]
    for task_filter, expected in cases:
        final = await run_to_end(storage, clock, "retry", task_filter)
        changed = [
            task_id
            for task_id, status in zip(ids, await statuses(storage, ids), strict=True)
            if status == "ready"
        ]
        assert (sorted(changed), final.changed) == (sorted(expected), len(expected)), task_filter
        # Back to failed for the next case.
        again = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
        await storage.dispatch.record_results(
            [result_for(c, clock.now(), "failed", codes[c.id]) for c in again], clock.now()
        )
        clock.advance(1)


async def test_operations_list_newest_first_with_their_filter(storage: Storage, clock: VirtualClock) -> None:
    first = await storage.operations.create_operation(
        new_id("op"), "retry", TaskFilter(queue="a", status="failed"), clock.now()
    )
    second = await storage.operations.create_operation(
        new_id("op"), "cancel", TaskFilter(created_after=clock.now(), last_status_code=503), clock.now()
    )
    page, next_seq = await storage.operations.list_operations(1, None)
    assert [op.id for op in page] == [second.id] and next_seq is not None
    rest, end = await storage.operations.list_operations(10, next_seq)
    assert [op.id for op in rest] == [first.id] and end is None
    assert rest[0].filter == TaskFilter(queue="a", status="failed")
    assert page[0].filter == TaskFilter(created_after=clock.now(), last_status_code=503)
    assert await storage.operations.get_operation("op_missing") is None


# --- callbacks ---------------------------------------------------------------------------


@pytest.mark.parametrize(("outcome", "code"), [("succeeded", 200), ("failed", 500)])
async def test_a_final_outcome_with_a_callback_is_due_once(
    storage: Storage, clock: VirtualClock, outcome: str, code: int
) -> None:
    with_callbacks = new(
        max_attempts=1, callback_url="http://127.0.0.1:9/ok", failure_callback_url="http://127.0.0.1:9/ko"
    )
    without = new(max_attempts=1)
    await storage.tasks.enqueue(in_queue("q", [with_callbacks, without]), clock.now())
    claimed = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert {c.id: c.capture_response for c in claimed} == {with_callbacks.id: True, without.id: False}
    results = [
        replace(result_for(c, clock.now(), outcome, code), response=b"\x00answer\xff") for c in claimed
    ]  # type: ignore[arg-type]
    await storage.dispatch.record_results(results, clock.now())
    [due] = await storage.callbacks.due_callbacks(10)
    assert (due.task.id, due.task.status, due.task.attempts) == (with_callbacks.id, outcome, 1)
    assert due.attempt is not None and (due.attempt.attempt, due.attempt.response) == (1, b"\x00answer\xff")
    assert await storage.callbacks.clear_callbacks([(due.task.id, due.task.attempts)]) == 1
    assert await storage.callbacks.due_callbacks(10) == []


async def test_a_redriven_task_that_finishes_again_has_a_callback_again(
    storage: Storage, clock: VirtualClock
) -> None:
    task = new(max_attempts=1, failure_callback_url="http://127.0.0.1:9/ko")
    await fail_all(storage, clock, in_queue("q", [task]))
    [due] = await storage.callbacks.due_callbacks(10)
    await storage.tasks.retry_task(task.id, clock.now())
    assert await storage.callbacks.due_callbacks(10) == []  # not final any more: nothing to tell yet
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "failed", 502)], clock.now())
    # The sender read the first failure but cleared it only now: that must not clear the second.
    assert await storage.callbacks.clear_callbacks([(due.task.id, due.task.attempts)]) == 0
    [again] = await storage.callbacks.due_callbacks(10)
    assert (again.task.attempts, again.task.last_status_code) == (2, 502)


async def test_each_outcome_has_its_own_callback_even_with_the_same_attempt_count(
    storage: Storage, clock: VirtualClock
) -> None:
    task = new(max_attempts=1, deadline=60.0, failure_callback_url="http://127.0.0.1:9/ko")
    await fail_all(storage, clock, in_queue("q", [task]))
    [first] = await storage.callbacks.due_callbacks(10)
    assert await storage.callbacks.clear_callbacks([(first.task.id, first.seq)]) == 1
    await storage.tasks.retry_task(task.id, clock.now())
    # Claimed after its deadline: not sent, so its attempts stay where they were (1).
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.advance(120), token(), MARGIN)).tasks
    unsent = replace(result_for(claimed, clock.now(), "failed", None), sent=False, error="deadline passed")
    assert (await storage.dispatch.record_results([unsent], clock.now())).accepted == 1
    [second] = await storage.callbacks.due_callbacks(10)
    assert (second.task.attempts, second.task.last_error) == (1, "deadline passed")
    assert second.seq == first.seq + 1  # its own callback, not a repeat of the first
    assert (
        await storage.callbacks.clear_callbacks([(first.task.id, first.seq)]) == 0
    )  # a late clear of the first
    assert [d.seq for d in await storage.callbacks.due_callbacks(10)] == [second.seq]


async def test_a_task_the_reaper_fails_has_its_failure_callback_due(
    storage: Storage, clock: VirtualClock
) -> None:
    task = new(max_attempts=1, timeout=1, failure_callback_url="http://127.0.0.1:9/ko")
    await storage.tasks.enqueue(in_queue("q", [task]), clock.now())
    await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
    assert await storage.upkeep.reap_expired(clock.advance(MARGIN + 5)) == 1
    [due] = await storage.callbacks.due_callbacks(10)
    assert due.task.status == "failed" and due.attempt is not None
    assert due.attempt.error is not None and "lease expired" in due.attempt.error


async def test_an_event_gives_its_callbacks_to_each_delivery(storage: Storage, clock: VirtualClock) -> None:
    for _ in range(2):
        await storage.webhooks.create_endpoint(
            new_id("ep"), EndpointSpec(url="http://127.0.0.1:9/"), clock.now()
        )
    event = NewEvent(
        id=new_id("evt"), type="invoice.paid", payload=b"{}", content_type="application/json",
        callback_url="http://127.0.0.1:9/ok", failure_callback_url="http://127.0.0.1:9/ko",
    )  # fmt: skip
    published = await storage.webhooks.publish(event, clock.now(), new_task_id)
    assert published is not None
    stored = await storage.webhooks.get_event(event.id)
    assert stored is not None and (stored.callback_url, stored.failure_callback_url) == (
        "http://127.0.0.1:9/ok",
        "http://127.0.0.1:9/ko",
    )
    for delivery in published.event.deliveries:
        task = await storage.tasks.get_task(delivery.task_id)
        assert task is not None
        assert (task.callback_url, task.failure_callback_url) == (
            "http://127.0.0.1:9/ok",
            "http://127.0.0.1:9/ko",
        )


async def test_task_policy_fields_are_stored_and_shown_with_the_queue_defaults(
    storage: Storage, clock: VirtualClock
) -> None:
    own = new(stop_on=("4xx",), deadline=60.0, min_backoff=2.0, max_backoff=4.0, callback_of="task_other")
    inherited = new()
    entries = await storage.tasks.enqueue(in_queue("q", [own, inherited]), clock.now())
    shown = [entry.task for entry in entries]
    assert (shown[0].stop_on, shown[0].deadline, shown[0].min_backoff, shown[0].max_backoff) == (
        ("4xx",),
        60.0,
        2.0,
        4.0,
    )
    assert shown[0].callback_of == "task_other"
    assert (shown[1].stop_on, shown[1].deadline, shown[1].min_backoff, shown[1].max_backoff) == (
        ("410",),
        None,
        1.0,
        3600.0,
    )
    claimed = {c.id: c for c in (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks}
    assert (claimed[own.id].stop_on, claimed[own.id].deadline_at) == (
        ("4xx",),
        clock.now() + timedelta(seconds=60),
    )
    assert (claimed[own.id].min_backoff, claimed[own.id].max_backoff) == (2.0, 4.0)
    assert (claimed[inherited.id].stop_on, claimed[inherited.id].deadline_at) == (("410",), None)
    leased = clock.now() + timedelta(seconds=30 + MARGIN)  # the default timeout, plus the margin
    assert [await storage.tasks.get_task(t.id) for t in (own, inherited)] == [
        replace(shown[0], status="running", attempts=1, updated_at=clock.now(), lease_expires_at=leased),
        replace(shown[1], status="running", attempts=1, updated_at=clock.now(), lease_expires_at=leased),
    ]


async def test_a_queue_policy_applies_to_its_tasks_and_a_redrive_restarts_the_deadline(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.queues.put_queue("q", QueueConfig(stop_on=("404", "5xx"), deadline=100.0), clock.now())
    queue = await storage.queues.get_queue("q")
    assert queue is not None and (queue.config.stop_on, queue.config.deadline) == (("404", "5xx"), 100.0)
    [stored] = await storage.tasks.enqueue(in_queue("q", [new(max_attempts=1)]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert (claimed.stop_on, claimed.deadline_at) == (
        ("404", "5xx"),
        stored.task.created_at + timedelta(seconds=100),
    )
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "failed", 500)], clock.now())
    await storage.tasks.retry_task(stored.task.id, clock.advance(500))
    [again] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert again.deadline_at == clock.now() + timedelta(seconds=100)  # counts from the redrive
