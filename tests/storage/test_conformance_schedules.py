"""The storage contract for schedules: stored and read back whole, fired once per fire time
however many schedulers run on one database, catch-up after downtime, triggers, changes
atomic against firings. Every test runs on SQLite and on PostgreSQL, on the injected clock.

The plans come from workly/schedules.py (plan_firing), as the scheduler's do."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from tests.storage.helpers import URL, another_process
from tests.support.clock import VirtualClock
from workly.errors import ScheduleNotFound
from workly.ids import new_id, new_task_id
from workly.models import NewTask, Task
from workly.schedules import Fired, Firing, Schedule, ScheduleSpec, firing_key, first_run, plan_firing
from workly.storage.contract import FiringPlan, Storage
from workly.webhooks import EndpointSpec, NewEvent

TEMPLATE = NewTask(
    id="", queue="reports", url=URL, method="PUT", headers={"content-type": "text/plain", "x-a": "1"},
    body=b"\x00daily\xff", priority=5, key="k", tenant="t", max_attempts=3, timeout=7.5,
    breaker="http://127.0.0.1:9", stop_on=("404", "5xx"), deadline=600.0, min_backoff=2.0, max_backoff=20.0,
    callback_url="http://127.0.0.1:9/ok", failure_callback_url="http://127.0.0.1:9/ko",
)  # fmt: skip
EVENT = NewEvent(id="", type="report.ready", payload=b'{"n":1}', content_type="application/json", key="r")


def task_spec(cron: str = "* * * * *", **fields: object) -> ScheduleSpec:
    return replace(ScheduleSpec(cron=cron, task=TEMPLATE), **fields)  # type: ignore[arg-type]


async def create(storage: Storage, clock: VirtualClock, spec: ScheduleSpec) -> Schedule:
    return await storage.schedules.create_schedule(
        new_id("sch"), spec, first_run(spec, clock.now()), clock.now()
    )


def planner(now: datetime) -> FiringPlan:
    return lambda schedule: plan_firing(schedule, now, new_task_id(), new_id("evt"))


async def fire(storage: Storage, clock: VirtualClock, limit: int = 100) -> list[Fired]:
    return await storage.schedules.fire_due_schedules(clock.now(), limit, planner(clock.now()), new_task_id)


async def tasks_of(storage: Storage, queue: str = "reports") -> list[Task]:
    """The queue's tasks, oldest fire time first (none when the queue was never made)."""
    if await storage.queues.get_queue(queue) is None:
        return []
    found, _ = await storage.tasks.list_tasks(queue, None, 500, None)
    return sorted(found, key=lambda task: task.run_at)


async def test_a_schedule_is_stored_and_read_back_whole(storage: Storage, clock: VirtualClock) -> None:
    spec = task_spec("*/5 * * * *", timezone="Europe/Amsterdam", name="digest", catch_up="none")
    created = await create(storage, clock, spec)
    assert created.id.startswith("sch_") and created.spec == spec
    assert created.next_run_at == clock.now() + timedelta(minutes=5)  # 12:00 UTC → 12:05
    assert (created.last_run_at, created.last_task_id, created.last_event_id) == (None, None, None)
    assert created.created_at == created.updated_at == clock.now()
    assert await storage.schedules.get_schedule(created.id) == created
    event = await create(storage, clock, ScheduleSpec(cron="0 9 * * *", event=EVENT, paused=True))
    assert event.spec.event == EVENT and event.spec.task is None and event.next_run_at is None
    assert await storage.schedules.get_schedule("sch_missing") is None


async def test_schedules_list_newest_first_with_a_cursor(storage: Storage, clock: VirtualClock) -> None:
    ids = [(await create(storage, clock, task_spec())).id for _ in range(3)]
    first, next_seq = await storage.schedules.list_schedules(2, None)
    assert [s.id for s in first] == ids[::-1][:2] and next_seq is not None
    rest, end = await storage.schedules.list_schedules(2, next_seq)
    assert ([s.id for s in rest], end) == ([ids[0]], None)


async def test_a_due_schedule_fires_once_and_moves_on(storage: Storage, clock: VirtualClock) -> None:
    schedule = await create(storage, clock, task_spec())
    assert await fire(storage, clock) == []  # not due yet
    clock.advance(60.2)  # 12:01:00.2
    [made] = await fire(storage, clock)
    fire_at = datetime(2030, 1, 1, 12, 1, tzinfo=clock.now().tzinfo)
    assert (made.schedule_id, made.fire_at, made.created) == (schedule.id, fire_at, True)
    [task] = await tasks_of(storage)
    assert task.id == made.task_id and task.run_at == fire_at and task.status == "ready"
    assert (
        task.idempotency_key
        == firing_key(schedule.id, fire_at)
        == f"schedule:{schedule.id}:2030-01-01T12:01:00Z"
    )
    assert (task.url, task.method, task.body, task.headers["x-a"]) == (URL, "PUT", b"\x00daily\xff", "1")
    assert (task.priority, task.key, task.tenant, task.max_attempts, task.timeout) == (5, "k", "t", 3, 7.5)
    assert (task.stop_on, task.deadline, task.callback_url) == (
        ("404", "5xx"),
        600.0,
        "http://127.0.0.1:9/ok",
    )
    after = await storage.schedules.get_schedule(schedule.id)
    assert after is not None
    assert (after.next_run_at, after.last_run_at, after.last_task_id) == (
        fire_at + timedelta(minutes=1), fire_at, task.id,
    )  # fmt: skip
    assert await fire(storage, clock) == []  # nothing more until 12:02


async def test_four_schedulers_on_one_database_make_each_firing_once(
    storage: Storage, clock: VirtualClock, database_url: str
) -> None:
    others = [await another_process(storage, database_url) for _ in range(3)]
    schedulers = [storage, *others]
    try:
        schedules = [await create(storage, clock, task_spec(cron)) for cron in ("* * * * *", "*/2 * * * *")]
        for _ in range(12):  # twelve minutes, every scheduler firing at once each minute
            clock.advance(60)
            rounds = await asyncio.gather(*(fire(s, clock, limit=1) for s in schedulers for _ in range(2)))
            assert sum(len(r) for r in rounds) <= 2
        tasks = await tasks_of(storage)
        keys = [task.idempotency_key for task in tasks]
        assert len(keys) == len(set(keys)) == 12 + 6
        for schedule in schedules:
            mine = [
                t
                for t in tasks
                if t.idempotency_key and t.idempotency_key.startswith(f"schedule:{schedule.id}:")
            ]
            step = 1 if schedule.spec.cron == "* * * * *" else 2
            assert [t.run_at for t in mine] == [
                datetime(2030, 1, 1, 12, minute, tzinfo=clock.now().tzinfo)
                for minute in range(step, 13, step)
            ]
    finally:
        for other in others:
            await other.close()


async def test_after_downtime_catch_up_latest_fires_once_for_the_missed_window(
    storage: Storage, clock: VirtualClock
) -> None:
    schedule = await create(storage, clock, task_spec("*/10 * * * *"))
    clock.advance(3 * 3600 + 125)  # down from 12:00 to 15:02:05: eighteen fire times missed
    [made] = await fire(storage, clock)
    fire_at = datetime(2030, 1, 1, 15, 0, tzinfo=clock.now().tzinfo)
    assert (made.fire_at, made.created) == (fire_at, True)
    [task] = await tasks_of(storage)
    assert task.run_at == fire_at
    after = await storage.schedules.get_schedule(schedule.id)
    assert after is not None and after.next_run_at == fire_at + timedelta(minutes=10)


async def test_after_downtime_catch_up_none_skips_to_the_next_time(
    storage: Storage, clock: VirtualClock
) -> None:
    schedule = await create(storage, clock, task_spec("*/10 * * * *", catch_up="none"))
    clock.advance(3 * 3600 + 125)
    [made] = await fire(storage, clock)
    assert (made.fire_at, made.task_id, made.created) == (None, None, False)
    assert await tasks_of(storage) == []
    after = await storage.schedules.get_schedule(schedule.id)
    assert after is not None and after.last_run_at is None
    assert after.next_run_at == datetime(2030, 1, 1, 15, 10, tzinfo=clock.now().tzinfo)
    clock.advance(7 * 60 + 56)  # 15:10:01: a second late is not missed
    [on_time] = await fire(storage, clock)
    assert on_time.created and on_time.fire_at == datetime(2030, 1, 1, 15, 10, tzinfo=clock.now().tzinfo)


async def test_paused_schedules_never_fire_but_can_be_triggered(
    storage: Storage, clock: VirtualClock
) -> None:
    schedule = await create(storage, clock, task_spec(paused=True))
    clock.advance(3600)
    assert await fire(storage, clock) == []
    now = clock.now()
    made, answered = await storage.schedules.trigger_schedule(
        schedule.id,
        now,
        lambda s: plan_firing(s, now, new_task_id(), new_id("evt"), trigger=True),
        new_task_id,
    )
    assert made.created and made.fire_at == now
    [task] = await tasks_of(storage)
    assert task.id == made.task_id and task.run_at == now
    after = await storage.schedules.get_schedule(schedule.id)
    assert after == answered  # the schedule as the trigger's transaction left it
    assert (after.next_run_at, after.last_task_id, after.last_run_at) == (None, task.id, now)
    with pytest.raises(ScheduleNotFound):
        await storage.schedules.trigger_schedule("sch_missing", now, planner(now), new_task_id)


async def test_a_firing_made_before_is_not_made_again(storage: Storage, clock: VirtualClock) -> None:
    schedule = await create(storage, clock, task_spec())
    clock.advance(60)  # exactly 12:01: a trigger now has the key of the 12:01 firing
    now = clock.now()
    by_hand, _ = await storage.schedules.trigger_schedule(
        schedule.id,
        now,
        lambda s: plan_firing(s, now, new_task_id(), new_id("evt"), trigger=True),
        new_task_id,
    )
    [due] = await fire(storage, clock)
    assert by_hand.created and not due.created and due.task_id == by_hand.task_id
    assert len(await tasks_of(storage)) == 1


async def test_an_event_schedule_publishes_to_the_matching_endpoints(
    storage: Storage, clock: VirtualClock
) -> None:
    endpoint = await storage.webhooks.create_endpoint(
        new_id("ep"), EndpointSpec(url=URL, event_types=("report.*",)), clock.now()
    )
    schedule = await create(storage, clock, ScheduleSpec(cron="* * * * *", event=EVENT))
    clock.advance(61)
    [made] = await fire(storage, clock)
    assert made.created and made.event_id is not None and made.task_id is None
    event = await storage.webhooks.get_event(made.event_id)
    assert event is not None and event.type == "report.ready" and event.payload == b'{"n":1}'
    assert event.idempotency_key == firing_key(
        schedule.id, datetime(2030, 1, 1, 12, 1, tzinfo=clock.now().tzinfo)
    )
    assert [d.endpoint_id for d in event.deliveries] == [endpoint.id]
    after = await storage.schedules.get_schedule(schedule.id)
    assert after is not None and after.last_event_id == event.id


async def test_update_applies_the_change_inside_the_transaction(
    storage: Storage, clock: VirtualClock
) -> None:
    schedule = await create(storage, clock, task_spec())
    clock.advance(5)
    later = clock.now() + timedelta(hours=1)

    def change(current: Schedule) -> tuple[ScheduleSpec, datetime | None]:
        assert current == schedule
        return replace(current.spec, cron="0 * * * *", name="hourly"), later

    changed = await storage.schedules.update_schedule(schedule.id, change, clock.now())
    assert (changed.spec.cron, changed.spec.name, changed.next_run_at) == ("0 * * * *", "hourly", later)
    assert changed.updated_at == clock.now() and changed.created_at == schedule.created_at

    def refuse(current: Schedule) -> tuple[ScheduleSpec, datetime | None]:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await storage.schedules.update_schedule(schedule.id, refuse, clock.now())
    assert await storage.schedules.get_schedule(schedule.id) == changed
    with pytest.raises(ScheduleNotFound):
        await storage.schedules.update_schedule("sch_missing", change, clock.now())


async def test_delete_leaves_the_tasks_it_made(storage: Storage, clock: VirtualClock) -> None:
    schedule = await create(storage, clock, task_spec())
    clock.advance(60)
    [made] = await fire(storage, clock)
    await storage.schedules.delete_schedule(schedule.id)
    assert await storage.schedules.get_schedule(schedule.id) is None
    assert [t.id for t in await tasks_of(storage)] == [made.task_id]
    with pytest.raises(ScheduleNotFound):
        await storage.schedules.delete_schedule(schedule.id)


async def test_next_schedule_at_is_the_earliest_next_run(storage: Storage, clock: VirtualClock) -> None:
    assert await storage.schedules.next_schedule_at() is None
    await create(storage, clock, task_spec("0 * * * *"))
    await create(storage, clock, task_spec("*/5 * * * *"))
    await create(storage, clock, task_spec("* * * * *", paused=True))
    assert await storage.schedules.next_schedule_at() == clock.now() + timedelta(minutes=5)


async def test_a_batch_limit_leaves_the_rest_for_the_next_round(
    storage: Storage, clock: VirtualClock
) -> None:
    for _ in range(5):
        await create(storage, clock, task_spec())
    clock.advance(60)
    assert len(await fire(storage, clock, limit=3)) == 3
    assert len(await fire(storage, clock, limit=3)) == 2
    assert len(await tasks_of(storage)) == 5


async def test_skipped_and_unplanned_schedules_are_left_as_they_are(
    storage: Storage, clock: VirtualClock
) -> None:
    skipped, unplanned, fired_one = [await create(storage, clock, task_spec()) for _ in range(3)]
    clock.advance(60)
    assert (
        await storage.schedules.next_schedule_at(skip=[s.id for s in (skipped, unplanned, fired_one)]) is None
    )
    assert await storage.schedules.next_schedule_at(skip=[skipped.id]) == skipped.next_run_at
    now = clock.now()

    def plan(schedule: Schedule) -> Firing | None:
        assert schedule.id != skipped.id, "a skipped schedule is not even read"
        return None if schedule.id == unplanned.id else planner(now)(schedule)

    [made] = await storage.schedules.fire_due_schedules(now, 10, plan, new_task_id, skip=[skipped.id])
    assert made.schedule_id == fired_one.id
    for untouched in (skipped, unplanned):
        assert await storage.schedules.get_schedule(untouched.id) == untouched  # still due, as it was
