"""The storage contract, task side: every test runs on SQLite and on PostgreSQL.

Same semantics, not only the same method names (seed 001: a Postgres claim that
ignored null run_at while SQLite treated it as due).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.storage.helpers import in_queue, new, result_for, token
from tests.support.clock import VirtualClock
from workly.errors import TaskNotFound, TaskStateConflict
from workly.models import QueueConfig
from workly.storage.contract import Storage

MARGIN = 30.0


async def test_enqueue_returns_the_stored_task(storage: Storage, clock: VirtualClock) -> None:
    task = new(method="PUT", headers={"x-a": "1"}, body=b"\x00\xffraw", priority=3, key="k", tenant="t")
    [stored] = await storage.tasks.enqueue(in_queue("q", [task]), clock.now())
    assert stored.created
    got = stored.task
    assert (got.id, got.queue, got.status, got.method, got.body) == (
        task.id,
        "q",
        "ready",
        "PUT",
        b"\x00\xffraw",
    )
    assert (got.headers, got.priority, got.key, got.tenant) == ({"x-a": "1"}, 3, "k", "t")
    assert got.attempts == 0
    assert got.max_attempts == 10  # the queue default fills in
    assert got.timeout == 30.0
    assert got.created_at == clock.now()
    assert await storage.tasks.get_task(task.id) == got


async def test_null_run_at_is_due_now(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new(run_at=None)]), clock.now())
    assert stored.task.run_at == clock.now()
    claimed = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert [c.id for c in claimed] == [stored.task.id]


async def test_a_task_is_not_claimed_before_it_is_due(storage: Storage, clock: VirtualClock) -> None:
    later = new(run_at=clock.now() + timedelta(seconds=60))
    await storage.tasks.enqueue(in_queue("q", [later]), clock.now())
    assert (await storage.dispatch.claim_tasks(10, clock.advance(59.999), token(), MARGIN)).tasks == []
    claimed = (await storage.dispatch.claim_tasks(10, clock.advance(0.001), token(), MARGIN)).tasks
    assert [c.id for c in claimed] == [later.id]


async def test_higher_priority_first_then_fifo(storage: Storage, clock: VirtualClock) -> None:
    tasks = [new(priority=p) for p in (0, 5, 0, 5, -1, 0)]
    for task in tasks:  # one at a time: enqueue order is the FIFO order
        await storage.tasks.enqueue(in_queue("q", [task]), clock.now())
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    claimed = (await storage.dispatch.claim_tasks(100, clock.now(), token(), MARGIN)).tasks
    expected = [tasks[1], tasks[3], tasks[0], tasks[2], tasks[5], tasks[4]]
    assert [c.id for c in claimed] == [t.id for t in expected]


async def test_fifo_within_one_batch_enqueue(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    tasks = [new() for _ in range(20)]
    await storage.tasks.enqueue(in_queue("q", tasks), clock.now())
    claimed = (await storage.dispatch.claim_tasks(100, clock.now(), token(), MARGIN)).tasks
    assert [c.id for c in claimed] == [t.id for t in tasks]


async def test_claim_respects_the_batch_limit(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue(in_queue("q", [new() for _ in range(10)]), clock.now())
    first = (await storage.dispatch.claim_tasks(4, clock.now(), token(), MARGIN)).tasks
    second = (await storage.dispatch.claim_tasks(100, clock.now(), token(), MARGIN)).tasks
    assert len(first) == 4
    assert len(second) == 6
    assert not {c.id for c in first} & {c.id for c in second}


async def test_claim_marks_running_and_counts_the_attempt(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new(max_attempts=4, timeout=2.5)]), clock.now())
    lease = token()
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), lease, MARGIN)).tasks
    assert (claimed.attempt, claimed.max_attempts, claimed.timeout) == (1, 4, 2.5)
    assert (claimed.min_backoff, claimed.max_backoff, claimed.lease_token) == (1.0, 3600.0, lease)
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert (task.status, task.attempts) == ("running", 1)
    assert (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks == []


async def test_success_is_recorded_with_its_attempt(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    summary = await storage.dispatch.record_results(
        [result_for(claimed, clock.now(), "succeeded", 204)], clock.now()
    )
    assert (summary.accepted, summary.stale) == (1, 0)
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert (task.status, task.last_status_code, task.last_error) == ("succeeded", 204, None)
    [attempt] = await storage.tasks.list_attempts(stored.task.id)
    assert (attempt.attempt, attempt.status_code, attempt.stale) == (1, 204, False)
    assert attempt.response == b"response body"
    assert attempt.duration_ms == 7.0


async def test_retry_returns_the_task_at_its_next_run_at(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [first] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results(
        [result_for(first, clock.now(), "retry", 500, retry_in=5)], clock.now()
    )
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert (task.status, task.attempts, task.last_status_code) == ("ready", 1, 500)
    assert task.run_at == clock.now() + timedelta(seconds=5)
    assert (await storage.dispatch.claim_tasks(10, clock.advance(4.9), token(), MARGIN)).tasks == []
    [second] = (await storage.dispatch.claim_tasks(10, clock.advance(0.1), token(), MARGIN)).tasks
    assert second.attempt == 2
    await storage.dispatch.record_results([result_for(second, clock.now(), "succeeded", 200)], clock.now())
    attempts = await storage.tasks.list_attempts(stored.task.id)
    assert [(a.attempt, a.status_code) for a in attempts] == [(1, 500), (2, 200)]


async def test_failure_is_final(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "failed", 410)], clock.now())
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert (task.status, task.last_status_code, task.last_error) == ("failed", 410, "HTTP 410")
    assert (await storage.dispatch.claim_tasks(10, clock.advance(3600), token(), MARGIN)).tasks == []


async def test_a_result_under_a_foreign_lease_is_refused(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    stale = result_for(claimed, clock.now(), "failed", 500, lease_token=token())
    summary = await storage.dispatch.record_results([stale], clock.now())
    assert (summary.accepted, summary.stale) == (0, 1)
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert task.status == "running"  # the refused result changed nothing
    [attempt] = await storage.tasks.list_attempts(stored.task.id)
    assert attempt.stale
    summary = await storage.dispatch.record_results(
        [result_for(claimed, clock.now(), "succeeded")], clock.now()
    )
    assert (summary.accepted, summary.stale) == (1, 0)


async def test_a_second_result_for_one_lease_is_refused(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "succeeded")], clock.now())
    summary = await storage.dispatch.record_results(
        [result_for(claimed, clock.now(), "failed", 500)], clock.now()
    )
    assert summary.stale == 1
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert task.status == "succeeded"


async def test_results_for_deleted_tasks_are_dropped(storage: Storage, clock: VirtualClock) -> None:
    await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.queues.delete_queue("q")
    summary = await storage.dispatch.record_results(
        [result_for(claimed, clock.now(), "succeeded")], clock.now()
    )
    assert (summary.accepted, summary.stale) == (0, 1)


async def test_cancel_only_ready_tasks(storage: Storage, clock: VirtualClock) -> None:
    ready, running = new(), new()
    await storage.tasks.enqueue(in_queue("q", [running]), clock.now())
    await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
    await storage.tasks.enqueue(in_queue("q", [ready]), clock.now())
    canceled = await storage.tasks.cancel_task(ready.id, clock.advance(1))
    assert (canceled.status, canceled.updated_at) == ("canceled", clock.now())
    assert (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks == []
    with pytest.raises(TaskStateConflict):
        await storage.tasks.cancel_task(running.id, clock.now())
    with pytest.raises(TaskStateConflict):
        await storage.tasks.cancel_task(ready.id, clock.now())
    with pytest.raises(TaskNotFound):
        await storage.tasks.cancel_task("task_missing", clock.now())


async def test_redrive_gives_a_fresh_attempt_budget(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new(max_attempts=1)]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert (claimed.attempt, claimed.attempt_base) == (1, 0)
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "failed", 500)], clock.now())
    redriven = await storage.tasks.retry_task(stored.task.id, clock.advance(10))
    # Attempts go on counting across the redrive; the budget counts from it.
    assert (redriven.status, redriven.attempts, redriven.run_at) == ("ready", 1, clock.now())
    [again] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert (again.attempt, again.attempt_base, again.max_attempts) == (2, 1, 1)
    with pytest.raises(TaskStateConflict):
        await storage.tasks.retry_task(stored.task.id, clock.now())  # running now
    with pytest.raises(TaskNotFound):
        await storage.tasks.retry_task("task_missing", clock.now())


async def test_attempt_numbers_continue_across_redrives(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new(max_attempts=2)]), clock.now())
    for expected in (1, 2):
        [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
        assert claimed.attempt == expected
        outcome = "retry" if expected == 1 else "failed"
        await storage.dispatch.record_results(
            [result_for(claimed, clock.now(), outcome, 500, retry_in=0)], clock.now()
        )
    await storage.tasks.retry_task(stored.task.id, clock.advance(1))
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert (claimed.attempt, claimed.attempt_base) == (3, 2)
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "failed", 503)], clock.now())
    attempts = await storage.tasks.list_attempts(stored.task.id)
    assert [a.attempt for a in attempts] == [1, 2, 3]
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None and (task.status, task.attempts) == ("failed", 3)


async def test_reaper_counts_the_budget_from_the_redrive(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new(max_attempts=1, timeout=1)]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(claimed, clock.now(), "failed", 500)], clock.now())
    await storage.tasks.retry_task(stored.task.id, clock.now())
    await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)  # attempt 2, then its process dies
    assert await storage.upkeep.reap_expired(clock.advance(MARGIN + 5)) == 1
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None and (task.status, task.attempts) == ("failed", 2)


async def test_redrive_a_canceled_task(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new()]), clock.now())
    await storage.tasks.cancel_task(stored.task.id, clock.now())
    assert (await storage.tasks.retry_task(stored.task.id, clock.now())).status == "ready"


async def test_retry_makes_a_waiting_task_due_now(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(in_queue("q", [new(max_attempts=5)]), clock.now())
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results(
        [result_for(claimed, clock.now(), "retry", 500, retry_in=3600)], clock.now()
    )
    assert (await storage.dispatch.claim_tasks(10, clock.advance(1), token(), MARGIN)).tasks == []
    now_due = await storage.tasks.retry_task(stored.task.id, clock.now())
    # Due now, its attempts and budget untouched: attempt 2 of 5.
    assert (now_due.status, now_due.run_at, now_due.attempts) == ("ready", clock.now(), 1)
    [again] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert (again.id, again.attempt, again.attempt_base) == (stored.task.id, 2, 0)
    with pytest.raises(TaskStateConflict):
        await storage.tasks.retry_task(stored.task.id, clock.now())  # running: 409


async def test_retry_of_a_delayed_task_makes_it_due_now(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue(
        in_queue("q", [new(run_at=clock.now() + timedelta(days=1))]), clock.now()
    )
    assert (await storage.tasks.retry_task(stored.task.id, clock.advance(1))).run_at == clock.now()
    [claimed] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert claimed.id == stored.task.id


async def test_idempotency_key_returns_the_existing_task(storage: Storage, clock: VirtualClock) -> None:
    [first] = await storage.tasks.enqueue(
        in_queue("q", [new(idempotency_key="order-1", body=b"one")]), clock.now()
    )
    [second] = await storage.tasks.enqueue(
        in_queue("q", [new(idempotency_key="order-1", body=b"two")]), clock.now()
    )
    assert first.created and not second.created
    assert second.task == first.task
    [other_queue] = await storage.tasks.enqueue(
        in_queue("other", [new(idempotency_key="order-1")]), clock.now()
    )
    assert other_queue.created  # keys are per queue
    queue = await storage.queues.get_queue("q")
    assert queue is not None
    assert queue.counts["ready"] == 1


async def test_idempotency_key_repeated_within_one_batch(storage: Storage, clock: VirtualClock) -> None:
    a, b, c = new(idempotency_key="k"), new(idempotency_key="k"), new()
    entries = await storage.tasks.enqueue(in_queue("q", [a, b, c]), clock.now())
    assert [e.created for e in entries] == [True, False, True]
    assert entries[1].task.id == a.id
    assert [e.task.id for e in entries] == [a.id, a.id, c.id]


async def test_missing_tasks_read_as_none_or_not_found(storage: Storage, clock: VirtualClock) -> None:
    assert await storage.tasks.get_task("task_missing") is None
    with pytest.raises(TaskNotFound):
        await storage.tasks.list_attempts("task_missing")


async def test_one_call_may_enqueue_into_several_queues(storage: Storage, clock: VirtualClock) -> None:
    a, b, c = (
        new(queue="alpha"),
        new(queue="beta", idempotency_key="k"),
        new(queue="alpha", idempotency_key="k"),
    )
    entries = await storage.tasks.enqueue([a, b, c], clock.now())
    assert [(e.task.id, e.task.queue, e.created) for e in entries] == [
        (a.id, "alpha", True),
        (b.id, "beta", True),
        (c.id, "alpha", True),  # idempotency keys are per queue
    ]
    again = await storage.tasks.enqueue([new(queue="beta", idempotency_key="k")], clock.now())
    assert (again[0].task.id, again[0].created) == (b.id, False)
    assert sorted(q.name for q in await storage.queues.list_queues()) == ["alpha", "beta"]


async def test_a_retried_enqueue_of_the_same_tasks_stores_them_once(
    storage: Storage, clock: VirtualClock
) -> None:
    """A request whose transaction committed but whose answer was lost is tried again
    with the same task ids: it succeeds, and nothing is stored twice."""
    tasks = [new(), new(idempotency_key="k"), new()]
    first = await storage.tasks.enqueue(tasks, clock.now())
    again = await storage.tasks.enqueue([*tasks, new()], clock.now())
    assert [e.task for e in again[:3]] == [e.task for e in first]
    assert all(e.created for e in again)
    queue = await storage.queues.get_queue("q")
    assert queue is not None
    assert queue.counts["ready"] == 4
