"""The storage contract, leases: the reaper and the fence, on both backends."""

from __future__ import annotations

from datetime import timedelta

from tests.storage.helpers import new, result_for, token
from tests.support.clock import VirtualClock
from workly.models import QueueConfig
from workly.storage.contract import Storage

MARGIN = 30.0
LEASE = 30.0 + MARGIN  # the queue default timeout plus the margin


async def test_a_lease_that_has_not_expired_is_left_alone(storage: Storage, clock: VirtualClock) -> None:
    [stored] = await storage.tasks.enqueue([new()], clock.now())
    await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
    assert await storage.upkeep.reap_expired(clock.advance(LEASE - 0.001)) == 0
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert task.status == "running"


async def test_an_expired_lease_returns_the_task_with_the_attempt_counted(
    storage: Storage, clock: VirtualClock
) -> None:
    [stored] = await storage.tasks.enqueue([new()], clock.now())
    claimed_at = clock.now()
    await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
    reaped_at = clock.advance(LEASE + 1)
    assert await storage.upkeep.reap_expired(reaped_at) == 1
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert (task.status, task.attempts, task.run_at) == ("ready", 1, reaped_at)
    assert task.last_error is not None
    assert "lease expired" in task.last_error
    [attempt] = await storage.tasks.list_attempts(stored.task.id)
    assert (attempt.attempt, attempt.status_code, attempt.stale) == (1, None, False)
    assert (attempt.started_at, attempt.finished_at) == (claimed_at, reaped_at)
    [again] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    assert again.attempt == 2
    assert await storage.upkeep.reap_expired(clock.now()) == 0  # the new lease is fresh


async def test_a_running_task_shows_who_holds_it_and_until_when(
    storage: Storage, clock: VirtualClock
) -> None:
    [stored] = await storage.tasks.enqueue([new()], clock.now())
    assert (stored.task.lease_holder, stored.task.lease_expires_at) == (None, None)
    await storage.dispatch.claim_tasks(10, clock.now(), f"worker-7.internal:4242/{token()}", MARGIN)
    running = await storage.tasks.get_task(stored.task.id)
    assert running is not None
    until = clock.now() + timedelta(seconds=LEASE)
    assert (running.lease_holder, running.lease_expires_at) == ("worker-7.internal:4242", until)
    assert await storage.upkeep.reap_expired(clock.advance(LEASE + 1)) == 1
    ready = await storage.tasks.get_task(stored.task.id)
    assert ready is not None
    assert (ready.status, ready.lease_holder, ready.lease_expires_at) == ("ready", None, None)


async def test_the_lease_follows_the_tasks_timeout(storage: Storage, clock: VirtualClock) -> None:
    await storage.tasks.enqueue([new(timeout=5)], clock.now())
    await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)
    assert await storage.upkeep.reap_expired(clock.advance(5 + MARGIN - 0.01)) == 0
    assert await storage.upkeep.reap_expired(clock.advance(0.02)) == 1


async def test_a_task_that_strands_repeatedly_fails_at_max_attempts(
    storage: Storage, clock: VirtualClock
) -> None:
    [stored] = await storage.tasks.enqueue([new(max_attempts=3)], clock.now())
    for _ in range(3):
        assert len((await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks) == 1
        assert await storage.upkeep.reap_expired(clock.advance(LEASE + 1)) == 1
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert (task.status, task.attempts) == ("failed", 3)
    assert (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks == []
    assert len(await storage.tasks.list_attempts(stored.task.id)) == 3


async def test_a_result_from_a_reaped_claim_is_refused_and_kept_as_stale(
    storage: Storage, clock: VirtualClock
) -> None:
    [stored] = await storage.tasks.enqueue([new()], clock.now())
    [first] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.upkeep.reap_expired(clock.advance(LEASE + 1))
    [second] = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(second, clock.now(), "succeeded", 204)], clock.now())
    late = await storage.dispatch.record_results([result_for(first, clock.now(), "failed", 500)], clock.now())
    assert (late.accepted, late.stale) == (0, 1)
    task = await storage.tasks.get_task(stored.task.id)
    assert task is not None
    assert (task.status, task.last_status_code) == ("succeeded", 204)  # not overwritten
    attempts = await storage.tasks.list_attempts(stored.task.id)
    assert [(a.attempt, a.status_code, a.stale) for a in attempts] == [
        (1, None, False),
        (2, 204, False),
        (1, 500, True),
    ]


async def test_the_reaper_works_in_batches(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=100), clock.now())
    await storage.tasks.enqueue([new() for _ in range(7)], clock.now())
    await storage.dispatch.claim_tasks(100, clock.now(), token(), MARGIN)
    later = clock.advance(LEASE + 1)
    assert [await storage.upkeep.reap_expired(later, limit=3) for _ in range(4)] == [3, 3, 1, 0]


async def test_the_heartbeat_extends_only_leases_still_held(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10), clock.now())
    await storage.tasks.enqueue([new(), new()], clock.now())
    held, finished = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(finished, clock.now(), "succeeded")], clock.now())
    leases = [(held.seq, held.lease_token), (finished.seq, finished.lease_token), (held.seq, "not-mine")]
    assert await storage.dispatch.extend_leases(leases, clock.advance(50), MARGIN) == {
        (held.seq, held.lease_token)
    }
    assert await storage.upkeep.reap_expired(clock.advance(11)) == 0  # past the first expiry (60 s)
    assert await storage.upkeep.reap_expired(clock.advance(LEASE - 10)) == 1  # past the renewed one (110 s)


async def test_one_lease_is_extended_only_while_held(storage: Storage, clock: VirtualClock) -> None:
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10), clock.now())
    await storage.tasks.enqueue([new(), new()], clock.now())
    held, finished = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    await storage.dispatch.record_results([result_for(finished, clock.now(), "succeeded")], clock.now())
    later = clock.advance(50)
    assert await storage.dispatch.extend_lease(held.seq, held.lease_token, later, MARGIN)
    assert not await storage.dispatch.extend_lease(finished.seq, finished.lease_token, later, MARGIN)
    assert not await storage.dispatch.extend_lease(held.seq, "not-mine", later, MARGIN)
    assert await storage.upkeep.reap_expired(clock.advance(11)) == 0  # past the first expiry (60 s)
    assert await storage.upkeep.reap_expired(clock.advance(LEASE - 10)) == 1  # past the renewed one
    assert not await storage.dispatch.extend_lease(held.seq, held.lease_token, clock.now(), MARGIN)


async def test_a_lease_is_never_moved_back(storage: Storage, clock: VirtualClock) -> None:
    """An extension that read an earlier ``now`` and commits after one that read a later ``now``
    (it waited for a connection, or for the row) leaves the later end."""
    await storage.queues.put_queue("q", QueueConfig(max_concurrency=10), clock.now())
    await storage.tasks.enqueue([new(), new()], clock.now())
    one, other = (await storage.dispatch.claim_tasks(10, clock.now(), token(), MARGIN)).tasks
    earlier, later = clock.advance(5), clock.advance(10)
    assert await storage.dispatch.extend_leases([(one.seq, one.lease_token)], later, MARGIN)
    assert await storage.dispatch.extend_lease(one.seq, one.lease_token, earlier, MARGIN)
    assert await storage.dispatch.extend_lease(other.seq, other.lease_token, later, MARGIN)
    assert await storage.dispatch.extend_leases([(other.seq, other.lease_token)], earlier, MARGIN)
    # Both now end LEASE after ``later``: a reaper just before that takes neither.
    assert await storage.upkeep.reap_expired(later + timedelta(seconds=LEASE - 1)) == 0
    assert await storage.upkeep.reap_expired(later + timedelta(seconds=LEASE + 1)) == 2
