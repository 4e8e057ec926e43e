"""PostgreSQL interleavings of a schedule's firing with a pause, a trigger and a delete of the
same schedule, forced: another connection holds the firing's queue row, so the firing's
transaction stalls (holding its schedule row) while the change queues up behind it.

A firing and a change never interleave: the change waits for the firing to commit, then
applies to the schedule as the firing left it; each fire time makes one task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta

import asyncpg
import pytest

from tests.storage.helpers import URL
from tests.support.clock import VirtualClock
from tests.support.pg_waits import wait_for_lock_waiters
from workly.ids import new_id, new_task_id
from workly.models import NewTask, QueueConfig
from workly.schedules import Fired, Schedule, ScheduleSpec, first_run, plan_firing
from workly.storage.postgres import PostgresStorage

pytestmark = pytest.mark.postgres
SPEC = ScheduleSpec(cron="* * * * *", task=NewTask(id="", queue="q", url=URL))


Pair = tuple[PostgresStorage, PostgresStorage, asyncpg.Connection]


@pytest.fixture
async def pair(pg_url: str) -> AsyncIterator[Pair]:
    """Two handles on one database (the scheduler's process and the API's), and a plain
    connection to hold locks with."""
    scheduler, api = await PostgresStorage.open(pg_url), await PostgresStorage.open(pg_url)
    holder = await asyncpg.connect(pg_url)
    try:
        yield scheduler, api, holder
    finally:
        await holder.close()
        await scheduler.close()
        await api.close()


async def race(
    pair: Pair,
    clock: VirtualClock,
    change: Callable[[PostgresStorage, Schedule], Awaitable[object]],
) -> tuple[Schedule, object]:
    """Create a schedule, stall its firing at the minute on the queue row, start ``change``
    behind it, let both finish; the schedule as created, and what ``change`` returned."""
    scheduler, api, holder = pair
    await api.queues.put_queue("q", QueueConfig(), clock.now())
    schedule = await api.schedules.create_schedule(
        new_id("sch"), SPEC, first_run(SPEC, clock.now()), clock.now()
    )
    clock.advance(60)
    now = clock.now()
    blocker = holder.transaction()
    await blocker.start()
    await holder.execute("SELECT name FROM queues WHERE name = 'q' FOR UPDATE")
    firing = asyncio.create_task(
        scheduler.schedules.fire_due_schedules(
            now, 10, lambda s: plan_firing(s, now, new_task_id(), new_id("evt")), new_task_id
        )
    )
    await wait_for_lock_waiters(holder, 1)  # the firing holds the schedule, waits for the queue
    changing = asyncio.create_task(change(api, schedule))
    await wait_for_lock_waiters(holder, 2)  # the change waits for the schedule
    await blocker.rollback()
    [fired] = await firing
    assert fired.created
    return schedule, await changing


async def tasks(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return list(await conn.fetch("SELECT id, run_at, idempotency_key FROM tasks ORDER BY run_at"))


async def test_a_pause_waits_for_the_firing_and_then_holds(pair: Pair, clock: VirtualClock) -> None:
    def pause(current: Schedule) -> tuple[ScheduleSpec, datetime | None]:
        return replace(current.spec, paused=True), None

    schedule, paused = await race(
        pair, clock, lambda api, s: api.schedules.update_schedule(s.id, pause, clock.now())
    )
    assert isinstance(paused, Schedule)
    [task] = await tasks(pair[2])
    assert (paused.spec.paused, paused.next_run_at, paused.last_task_id) == (True, None, task["id"])
    assert paused.last_run_at == schedule.next_run_at


async def test_a_trigger_waits_for_the_firing_and_finds_its_task(pair: Pair, clock: VirtualClock) -> None:
    def trigger(api: PostgresStorage, schedule: Schedule) -> Awaitable[tuple[Fired, Schedule]]:
        now = clock.now()  # the firing's instant: the trigger's key is that firing's key
        plan = lambda s: plan_firing(s, now, new_task_id(), new_id("evt"), trigger=True)  # noqa: E731
        return api.schedules.trigger_schedule(schedule.id, now, plan, new_task_id)

    schedule, result = await race(pair, clock, trigger)
    assert isinstance(result, tuple)
    made, after = result
    [task] = await tasks(pair[2])  # one task stands for both
    assert (made.created, made.task_id) == (False, task["id"])
    assert schedule.next_run_at is not None
    assert after.next_run_at == schedule.next_run_at + timedelta(minutes=1)  # the firing moved it on


async def test_a_delete_waits_for_the_firing_and_leaves_its_task(pair: Pair, clock: VirtualClock) -> None:
    schedule, _ = await race(pair, clock, lambda api, s: api.schedules.delete_schedule(s.id))
    assert await pair[1].schedules.get_schedule(schedule.id) is None
    [task] = await tasks(pair[2])
    assert task["idempotency_key"] == f"schedule:{schedule.id}:2030-01-01T12:01:00Z"
