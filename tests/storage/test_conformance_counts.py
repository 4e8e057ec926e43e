"""The cheap counts and the charts' history, on both backends.

A queue's counts per status come from a table triggers keep (migration 0014), not from
counting its tasks: a random walk through every kind of change compares them with the
tasks themselves after each step, before and after a fold. The delivery minutes add up
per series and minute and go when pruned.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
from datetime import timedelta

import asyncpg
import pytest

from tests.storage.helpers import another_process, in_queue, new, result_for, token
from tests.support.clock import VirtualClock
from workly.database_url import sqlite_path
from workly.delivery_stats import BUCKETS_MS, MinuteStats, minute_of
from workly.errors import QueueNotFound
from workly.models import TASK_STATUSES, ClaimedTask, Outcome, QueueConfig
from workly.storage.contract import Storage

MARGIN = 30.0
QUEUES = ("a", "b", "c")


async def counted(storage: Storage) -> dict[str, dict[str, int]]:
    return {queue.name: dict(queue.counts) for queue in await storage.queues.list_queues()}


async def true_counts(storage: Storage) -> dict[str, dict[str, int]]:
    """Every queue's tasks per status, from listing them."""
    truth: dict[str, dict[str, int]] = {}
    for queue in await storage.queues.list_queues():
        found, _ = await storage.tasks.list_tasks(queue.name, None, 10_000, None)
        per_status = dict.fromkeys(TASK_STATUSES, 0)
        for task in found:
            per_status[task.status] += 1
        truth[queue.name] = per_status
    return truth


async def assert_counts_true(storage: Storage) -> None:
    truth = await true_counts(storage)
    assert await counted(storage) == truth
    for name, per_status in truth.items():
        queue = await storage.queues.get_queue(name)
        assert queue is not None and dict(queue.counts) == per_status


class Walk:
    """Random changes of every kind that moves, adds or deletes tasks."""

    def __init__(self, storage: Storage, clock: VirtualClock, rng: random.Random) -> None:
        self.storage, self.clock, self.rng = storage, clock, rng
        self.claimed: list[ClaimedTask] = []

    async def step(self) -> str:
        name = self.rng.choice(
            ["enqueue", "enqueue", "claim", "record", "record", "cancel", "retry", "reap", "purge",
             "delete", "prune", "pause"]
        )  # fmt: skip
        await getattr(self, name)()
        return name

    async def enqueue(self) -> None:
        queue = self.rng.choice(QUEUES)
        tasks = [
            new(queue=queue, run_at=self.clock.now() + timedelta(seconds=self.rng.choice([0, 0, 30])),
                idempotency_key=self.rng.choice([None, None, "same"]))
            for _ in range(self.rng.randint(1, 4))
        ]  # fmt: skip
        await self.storage.tasks.enqueue(tasks, self.clock.now())

    async def claim(self) -> None:
        claim = await self.storage.dispatch.claim_tasks(
            self.rng.randint(1, 4), self.clock.now(), token(), MARGIN
        )
        self.claimed.extend(claim.tasks)

    async def record(self) -> None:
        if not self.claimed:
            return
        taken = [
            self.claimed.pop(self.rng.randrange(len(self.claimed))) for _ in range(min(2, len(self.claimed)))
        ]
        outcomes: list[Outcome] = ["succeeded", "retry", "failed"]
        results = []
        for task in taken:
            outcome = self.rng.choice(outcomes)
            retry_in = 5.0 if outcome == "retry" else None
            results.append(
                result_for(task, self.clock.now(), outcome, 200 if outcome == "succeeded" else 500, retry_in)
            )
        await self.storage.dispatch.record_results(results, self.clock.now())

    async def _some(self, status: str) -> str | None:
        found, _ = await self.storage.tasks.list_tasks(None, status, 50, None)  # type: ignore[arg-type]
        return self.rng.choice(found).id if found else None

    async def cancel(self) -> None:
        if task_id := await self._some("ready"):
            await self.storage.tasks.cancel_task(task_id, self.clock.now())

    async def retry(self) -> None:
        if task_id := await self._some(self.rng.choice(["failed", "canceled"])):
            await self.storage.tasks.retry_task(task_id, self.clock.now())

    async def reap(self) -> None:
        self.clock.advance(120)
        await self.storage.upkeep.reap_expired(self.clock.now())
        self.claimed.clear()  # their leases are gone: a result would be refused as stale

    async def purge(self) -> None:
        with contextlib.suppress(QueueNotFound):
            await self.storage.queues.purge_queue(self.rng.choice(QUEUES))

    async def delete(self) -> None:
        if self.rng.random() < 0.5:  # deleting often would leave little to count
            return
        queue = self.rng.choice(QUEUES)
        try:
            await self.storage.queues.delete_queue(queue)
        except QueueNotFound:
            return
        self.claimed = [task for task in self.claimed if task.queue != queue]

    async def prune(self) -> None:
        await self.storage.retention.prune_succeeded(self.clock.now() + timedelta(seconds=1))

    async def pause(self) -> None:  # changes no task: the counts must not move either
        queue = self.rng.choice(QUEUES)
        await self.storage.queues.put_queue(
            queue, QueueConfig(paused=self.rng.random() < 0.3), self.clock.now()
        )


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_kept_counts_match_the_tasks_through_every_change(
    storage: Storage, clock: VirtualClock, seed: int
) -> None:
    walk = Walk(storage, clock, random.Random(seed))
    for _ in range(60):
        step = await walk.step()
        try:
            await assert_counts_true(storage)
            await storage.upkeep.fold_task_counts()
            await assert_counts_true(storage)
        except AssertionError as error:
            raise AssertionError(f"after {step} (seed {seed})") from error


async def test_counts_are_shared_by_processes_and_folds_lose_nothing(
    storage: Storage, clock: VirtualClock, database_url: str
) -> None:
    other = await another_process(storage, database_url)
    try:
        await storage.tasks.enqueue(in_queue("a", [new() for _ in range(5)]), clock.now())
        await other.upkeep.fold_task_counts()
        await other.tasks.enqueue(in_queue("a", [new() for _ in range(3)]), clock.now())
        claim = await other.dispatch.claim_tasks(2, clock.now(), token(), MARGIN)
        await storage.upkeep.fold_task_counts()
        await other.upkeep.fold_task_counts()
        assert (await counted(storage))["a"]["ready"] == 6
        assert (await counted(storage))["a"]["running"] == 2
        await storage.dispatch.record_results(
            [result_for(task, clock.now(), "succeeded") for task in claim.tasks], clock.now()
        )
        assert await counted(other) == await true_counts(other)
    finally:
        await other.close()


def minute(scope: str, name: str, at: VirtualClock, **counts: int) -> MinuteStats:
    stats = MinuteStats(scope, name, minute_of(at.now()), **counts)  # type: ignore[arg-type]
    stats.buckets[2] = stats.attempts  # all of them took 10-25 ms
    return stats


async def test_delivery_minutes_add_up_per_series_and_minute(storage: Storage, clock: VirtualClock) -> None:
    first = minute_of(clock.now())
    await storage.history.add_delivery_minutes([minute("queue", "a", clock, succeeded=3, retried=1)])
    await storage.history.add_delivery_minutes(
        [minute("queue", "a", clock, succeeded=2, failed=1)]
    )  # another process
    await storage.history.add_delivery_minutes(
        [minute("endpoint", "ep_1", clock, succeeded=4), minute("queue", "b", clock, failed=2)]
    )
    clock.advance(60)
    await storage.history.add_delivery_minutes([minute("queue", "a", clock, succeeded=1)])

    [one, two] = await storage.history.delivery_minutes("queue", "a", first)
    assert (one.minute, one.succeeded, one.retried, one.failed) == (first, 5, 1, 1)
    assert one.buckets == [0, 0, 7] + [0] * (len(BUCKETS_MS) - 3)
    assert (two.minute, two.succeeded) == (first + timedelta(minutes=1), 1)
    assert [row.succeeded for row in await storage.history.delivery_minutes("endpoint", "ep_1", first)] == [4]
    assert await storage.history.delivery_minutes("endpoint", "a", first) == []  # a scope of its own
    assert [row.minute for row in await storage.history.delivery_minutes("queue", "a", two.minute)] == [
        two.minute
    ]

    every_queue = await storage.history.delivery_minutes("queue", None, first)
    assert [(row.name, row.minute, row.succeeded) for row in every_queue] == [
        ("a", first, 5), ("a", two.minute, 1), ("b", first, 0)
    ]  # fmt: skip
    await storage.history.prune_delivery_minutes(two.minute)
    assert [row.minute for row in await storage.history.delivery_minutes("queue", "a", first)] == [two.minute]
    assert await storage.history.delivery_minutes("queue", "b", first) == []


async def test_a_deleted_queue_takes_its_delivery_minutes_with_it(
    storage: Storage, clock: VirtualClock
) -> None:
    for name in ("a", "b"):
        await storage.queues.put_queue(name, QueueConfig(), clock.now())
    await storage.history.add_delivery_minutes(
        [minute("queue", "a", clock, succeeded=3), minute("queue", "b", clock, succeeded=1)]
    )
    await storage.queues.delete_queue("a")
    await storage.queues.put_queue("a", QueueConfig(), clock.now())  # made again: an empty chart
    every_queue = await storage.history.delivery_minutes("queue", None, minute_of(clock.now()))
    assert [(row.name, row.succeeded) for row in every_queue] == [("b", 1)]


async def behind_workly(database_url: str, sql: str) -> None:
    """A statement of the operator's, on a connection of its own."""
    if database_url.startswith("sqlite"):
        conn = sqlite3.connect(sqlite_path(database_url), isolation_level=None)
        try:
            conn.execute(sql)
        finally:
            conn.close()
        return
    pg = await asyncpg.connect(database_url)
    try:
        await pg.execute(sql)
    finally:
        await pg.close()


async def test_counts_a_write_behind_the_triggers_changed_are_found_and_counted_again(
    storage: Storage, clock: VirtualClock, database_url: str
) -> None:
    tasks = in_queue("a", [new(), new()]) + in_queue("b", [new()]) + in_queue("c", [new()])
    await storage.tasks.enqueue(tasks, clock.now())
    await storage.upkeep.fold_task_counts()
    assert await storage.upkeep.miscounted_queues() == []
    # What a restore with triggers disabled leaves: counts of tasks that are not there, or
    # none for tasks that are.
    await behind_workly(database_url, "INSERT INTO task_counts (queue, status, n) VALUES ('a', 'failed', 5)")
    await behind_workly(database_url, "DELETE FROM task_counts WHERE queue = 'c'")
    assert await storage.upkeep.miscounted_queues() == ["a", "c"]
    await storage.upkeep.recount_tasks()
    assert await storage.upkeep.miscounted_queues() == []
    await assert_counts_true(storage)
    await storage.tasks.enqueue(in_queue("c", [new()]), clock.now())  # the triggers go on from the new count
    await storage.upkeep.fold_task_counts()
    await assert_counts_true(storage)
