"""The scheduler in the service, on both backends: it sleeps until the next fire time and
the task goes out right after it; changes move the next run; catch-up after downtime;
what it counts. The in-process tests run on a clock shifted so that a minute boundary is
a second or two away (the real one would make a test wait up to a minute)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.clock import VirtualClock
from tests.support.receiver import Receiver, running_receiver
from tests.support.servers import TEST_SECRET, in_process
from workly.clock import SystemClock
from workly.config import Settings
from workly.schedules import Fired
from workly.service import Service
from workly.service.scheduler import Scheduler
from workly.storage.contract import FiringPlan

HOOK = "http://127.0.0.1:9/hook"  # never contacted: the dispatcher is off where it is used


class ShiftedClock(SystemClock):
    """The real clock, moved so that the next minute starts ``lead`` seconds from now."""

    def __init__(self, lead: float) -> None:
        now = datetime.now(UTC)
        next_minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        self.offset = next_minute - now - timedelta(seconds=lead)
        self.fire_at = next_minute  # on this clock

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def real(self, instant: datetime) -> float:
        """Where an instant on this clock falls on the real one (unix seconds)."""
        return (instant - self.offset).timestamp()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver() as receiver:
        yield receiver


async def create(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await http.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def succeeded(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    """The task once its result is recorded (that commit follows the delivery)."""
    for _ in range(500):
        task: dict[str, Any] = (await http.get(f"/v1/tasks/{task_id}")).json()
        if task["status"] == "succeeded":
            return task
        await asyncio.sleep(0.01)
    raise AssertionError(f"task {task_id} is still {task['status']}")


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_a_firing_is_delivered_within_a_second_of_its_fire_time(
    database_url: str, receiver: Receiver
) -> None:
    clock = ShiftedClock(lead=1.5)
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, outbound_allow="127.0.0.0/8")
    async with in_process(settings, clock) as (_, http):
        schedule = await create(
            http, {"cron": "* * * * *", "queue": "s", "task": {"url": receiver.url("/tick")}}
        )
        assert parse(schedule["next_run_at"]) == clock.fire_at
        [delivery] = await receiver.wait_for("/tick", 1, timeout=10)
        fire_at = clock.real(clock.fire_at)
        print(f"fire time → delivery: {(delivery.at - fire_at) * 1000:.1f} ms")
        assert fire_at <= delivery.at < fire_at + 1.0, delivery.at - fire_at
        after = (await http.get(f"/v1/schedules/{schedule['id']}")).json()
        assert after["last_run_at"] == schedule["next_run_at"]
        assert parse(after["next_run_at"]) == clock.fire_at + timedelta(minutes=1)
        task = await succeeded(http, after["last_task_id"])
        assert task["run_at"] == schedule["next_run_at"]
        assert delivery.headers["webhook-id"] == task["id"]


@pytest.fixture
async def paused_service(
    database_url: str, clock: VirtualClock
) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    """A service whose background parts do not run: the test fires schedules itself."""
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    async with in_process(settings, clock) as running:
        yield running


async def test_changes_move_the_next_run_and_a_resume_does_not_catch_up(
    paused_service: tuple[Service, httpx.AsyncClient], clock: VirtualClock
) -> None:
    service, http = paused_service
    start = clock.now()  # 12:00:00 UTC
    schedule = await create(http, {"cron": "0 * * * *", "queue": "s", "task": {"url": HOOK}})
    path = f"/v1/schedules/{schedule['id']}"
    assert parse(schedule["next_run_at"]) == start + timedelta(hours=1)
    clock.advance(30 * 60)  # 12:30
    renamed = (await http.patch(path, json={"name": "renamed"})).json()
    assert parse(renamed["next_run_at"]) == start + timedelta(hours=1)
    every_ten = (await http.patch(path, json={"cron": "*/10 * * * *"})).json()
    assert parse(every_ten["next_run_at"]) == start + timedelta(minutes=40)
    zoned = (await http.patch(path, json={"cron": "0 14 * * *", "timezone": "Europe/Amsterdam"})).json()
    assert parse(zoned["next_run_at"]) == start + timedelta(hours=1)  # 14:00 CET is 13:00 UTC
    await http.post(f"{path}/pause")
    clock.advance(3 * 3600)  # 15:30: it would have fired at 13:00
    assert await service.scheduler.fire_due() == []
    resumed = (await http.post(f"{path}/resume")).json()
    assert parse(resumed["next_run_at"]) == start + timedelta(days=1, hours=1)  # tomorrow, 14:00 CET
    assert await service.scheduler.fire_due() == []
    assert (await http.get("/v1/queues/s")).status_code == 404  # it never made a task


@pytest.mark.parametrize(("catch_up", "made"), [("latest", 1), ("none", 0)])
async def test_after_downtime_the_scheduler_catches_up_as_asked(
    paused_service: tuple[Service, httpx.AsyncClient], clock: VirtualClock, catch_up: str, made: int
) -> None:
    service, http = paused_service
    schedule = await create(
        http, {"cron": "* * * * *", "queue": "s", "catch_up": catch_up, "task": {"url": HOOK}}
    )
    clock.advance(10 * 60 + 30)  # down for ten minutes: back at 12:10:30
    fired = await service.scheduler.fire_due()
    assert len(fired) == 1 and sum(1 for f in fired if f.created) == made
    after = (await http.get(f"/v1/schedules/{schedule['id']}")).json()
    assert parse(after["next_run_at"]) == datetime(2030, 1, 1, 12, 11, tzinfo=UTC)
    metrics = (await http.get("/metrics")).text
    if made:
        assert after["last_run_at"] == "2030-01-01T12:10:00Z"
        task = (await http.get(f"/v1/tasks/{after['last_task_id']}")).json()
        assert task["run_at"] == "2030-01-01T12:10:00Z"
        assert 'workly_schedule_firings_total{outcome="created"} 1.0' in metrics
        assert "workly_schedule_lateness_seconds_sum 30.0" in metrics
    else:
        assert after["last_run_at"] is None and after["last_task_id"] is None
        assert 'workly_schedule_firings_total{outcome="skipped"} 1.0' in metrics
    assert await service.scheduler.fire_due() == []  # nothing more until 12:11


async def test_stopping_does_not_wait_for_a_sleeping_scheduler(
    database_url: str, clock: VirtualClock
) -> None:
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, poll_interval=30)
    service = Service(settings, clock)
    await service.start()
    await service.scheduler.fire_due()  # it runs; its loop now sleeps for up to 30 s
    await asyncio.wait_for(service.stop(), timeout=10)


async def test_a_lowered_body_limit_refuses_new_templates_but_not_a_pause(database_url: str) -> None:
    base = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    task = {"url": HOOK, "body": "x" * 100, "headers": {"content-type": "text/plain"}}
    async with in_process(base) as (_, http):
        schedule = await create(http, {"cron": "* * * * *", "task": task})
    async with in_process(base.model_copy(update={"max_body_bytes": 10})) as (_, http):
        path = f"/v1/schedules/{schedule['id']}"
        paused = await http.post(f"{path}/pause")
        assert paused.status_code == 200 and paused.json()["paused"] is True
        refused = await http.patch(path, json={"task": task})
        assert refused.status_code == 413 and refused.headers["content-type"] == "application/problem+json"
        assert (await http.get(path)).json()["task"]["body"] == "x" * 100


async def set_stored_timezone(database_url: str, schedule_id: str, zone: str) -> None:
    """What a process with an older tz database finds: a zone it cannot load (written straight
    into the database, as no API would take it)."""
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as db:
            db.execute("UPDATE schedules SET timezone = ? WHERE id = ?", (zone, schedule_id))
        return
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("UPDATE schedules SET timezone = $1 WHERE id = $2", zone, schedule_id)
    finally:
        await conn.close()


async def test_a_schedule_this_host_cannot_plan_is_left_due_for_a_host_that_can(
    paused_service: tuple[Service, httpx.AsyncClient], clock: VirtualClock, database_url: str
) -> None:
    service, http = paused_service
    broken = await create(http, {"cron": "0 * * * *", "queue": "s", "task": {"url": HOOK}})
    fine = [await create(http, {"cron": "* * * * *", "queue": "s", "task": {"url": HOOK}}) for _ in range(2)]
    await set_stored_timezone(database_url, broken["id"], "America/Nowhere")
    clock.advance(3600.2)  # 13:00:00.2: all three are due
    fired = await service.scheduler.fire_due()
    assert {f.schedule_id for f in fired} == {s["id"] for s in fine}  # the others went on
    listed = await http.get("/v1/schedules")
    assert listed.status_code == 200  # still shown, with the one next run it has
    left = (await http.get(f"/v1/schedules/{broken['id']}")).json()
    assert (left["next_run_at"], left["last_task_id"]) == (broken["next_run_at"], None)  # still due
    assert left["next_runs"] == [left["next_run_at"]]
    paused = await http.post(f"/v1/schedules/{broken['id']}/pause")  # an operator can still stop it
    assert paused.status_code == 200 and paused.json()["next_run_at"] is None
    await http.post(f"/v1/schedules/{broken['id']}/resume")  # back as it was: due from the next hour
    refused = await http.patch(f"/v1/schedules/{broken['id']}", json={"cron": "*/5 * * * *"})
    assert refused.status_code == 422 and "America/Nowhere" in refused.json()["detail"]


async def test_a_host_with_the_zone_fires_the_real_fire_time_the_other_left(
    paused_service: tuple[Service, httpx.AsyncClient], clock: VirtualClock, database_url: str
) -> None:
    service, http = paused_service
    schedule = await create(http, {"cron": "0 * * * *", "queue": "s", "task": {"url": HOOK}})
    await set_stored_timezone(database_url, schedule["id"], "America/Nowhere")
    clock.advance(3600.2)
    assert await service.scheduler.fire_due() == []
    assert await service.scheduler.fire_due() == []  # not tried again within the minute
    await set_stored_timezone(database_url, schedule["id"], "UTC")  # what a host that has it sees
    other_host = Scheduler(service.storage.schedules, clock, lambda: None)
    [made] = await other_host.fire_due()
    task = (await http.get(f"/v1/tasks/{made.task_id}")).json()
    assert task["run_at"] == "2030-01-01T13:00:00Z"  # the real fire time, under its own key
    assert task["idempotency_key"] == f"schedule:{schedule['id']}:2030-01-01T13:00:00Z"


async def test_triggers_are_counted_apart_from_fire_times(
    paused_service: tuple[Service, httpx.AsyncClient], clock: VirtualClock
) -> None:
    _, http = paused_service
    schedule = await create(http, {"cron": "0 0 1 1 *", "queue": "s", "task": {"url": HOOK}})
    assert (await http.post(f"/v1/schedules/{schedule['id']}/trigger")).status_code == 200
    metrics = (await http.get("/metrics")).text
    assert 'workly_schedule_firings_total{outcome="triggered"} 1.0' in metrics
    assert 'workly_schedule_firings_total{outcome="created"}' not in metrics
    assert "workly_schedule_lateness_seconds_count 0.0" in metrics


class EndlessSchedules:
    """A storage stand-in whose every batch of due schedules is full: more keep coming."""

    def __init__(self) -> None:
        self.batches = 0
        self.first_batch = asyncio.Event()

    async def fire_due_schedules(
        self,
        now: datetime,
        limit: int,
        plan: FiringPlan,
        new_task_id: Callable[[], str],
        skip: Collection[str] = (),
    ) -> list[Fired]:
        self.batches += 1
        self.first_batch.set()
        await asyncio.sleep(0)
        return [
            Fired(f"sch_{self.batches}_{n}", now, task_id=f"task_{n}", created=True) for n in range(limit)
        ]

    async def next_schedule_at(self, skip: Collection[str] = ()) -> datetime | None:
        return None


async def test_a_long_round_stops_with_the_scheduler_and_wakes_dispatchers_batch_by_batch(
    clock: VirtualClock,
) -> None:
    storage = EndlessSchedules()
    wakes: list[int] = []
    scheduler = Scheduler(storage, clock, lambda: wakes.append(storage.batches), batch=10)
    round_ = asyncio.create_task(scheduler.fire_due())
    await asyncio.wait_for(storage.first_batch.wait(), timeout=5)
    await asyncio.wait_for(scheduler.stop(), timeout=5)
    fired = await asyncio.wait_for(round_, timeout=5)
    assert len(fired) == 10 * storage.batches
    assert wakes == list(range(1, storage.batches + 1))  # each batch woke them as it committed
