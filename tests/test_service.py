"""The service (workly/service): its rules, its lifecycle and its wake-ups, on both backends.

The routes are tested through the API (tests/api); here the service is called directly, as
every adapter calls it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from tests.storage.helpers import new
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET
from workly.config import Settings
from workly.errors import (
    ConfigError,
    InvalidQueueConfig,
    QueueNotFound,
    ServiceNotRunning,
    StorageUnavailable,
    TaskNotFound,
    TooLarge,
)
from workly.models import QueueConfig
from workly.service import Service, migrate_database
from workly.storage.contract import Storage
from workly.storage.factory import open_storage


def settings_for(database_url: str, **overrides: object) -> Settings:
    fields: dict[str, object] = {"signing_secret": TEST_SECRET, "dispatch": False, **overrides}
    return Settings(database_url=database_url, **fields)  # type: ignore[arg-type]


@pytest.fixture
async def service(database_url: str) -> AsyncIterator[Service]:
    async with Service(settings_for(database_url, max_body_bytes=1024)).running() as running:
        yield running


def test_a_service_needs_a_database_and_valid_secrets() -> None:
    with pytest.raises(ConfigError, match="WORKLY_DATABASE_URL"):
        Service(Settings(signing_secret=TEST_SECRET))
    with pytest.raises(ConfigError, match="whsec_"):
        Service(Settings(database_url="sqlite:///x.db", signing_secret="not-a-secret"))


async def test_nothing_is_reachable_before_start_or_after_stop(database_url: str) -> None:
    service = Service(settings_for(database_url))
    with pytest.raises(ServiceNotRunning):  # a StorageUnavailable: the API answers 503
        await service.queues.list_queues()
    async with service.running():
        assert await service.queues.list_queues() == []
        with pytest.raises(RuntimeError, match="already running"):
            await service.start()
    with pytest.raises(ServiceNotRunning):
        await service.queues.list_queues()
    service.work_available()  # a change committing during shutdown has nobody left to wake


async def test_a_rate_limit_below_the_floor_is_refused_even_without_the_api(service: Service) -> None:
    for rate in (5e-324, 1e-309, 9.9e-7):
        with pytest.raises(InvalidQueueConfig, match="rate_limit must be at least"):
            await service.queues.put_queue("q", QueueConfig(rate_limit=rate))
    stored, _ = await service.queues.put_queue("q", QueueConfig(rate_limit=1e-6))
    assert stored.config.rate_limit == 1e-6


async def test_a_body_over_the_limit_is_refused_and_nothing_is_stored(service: Service) -> None:
    with pytest.raises(TooLarge, match="task 1's body is 1,025 bytes"):
        await service.tasks.enqueue([new(body=b"x" * 10), new(body=b"x" * 1025)])
    assert await service.queues.list_queues() == []


async def test_queue_configs_that_contradict_themselves_are_refused_and_change_nothing(
    service: Service,
) -> None:
    with pytest.raises(InvalidQueueConfig, match="min_backoff"):
        await service.queues.put_queue("q", QueueConfig(min_backoff=10, max_backoff=5))
    with pytest.raises(QueueNotFound):
        await service.queues.get_queue("q")
    await service.queues.put_queue("q", QueueConfig(max_backoff=5))
    with pytest.raises(InvalidQueueConfig, match="min_backoff"):
        await service.queues.update_queue("q", {"min_backoff": 10})
    assert (await service.queues.get_queue("q")).config == QueueConfig(max_backoff=5)


async def test_unknown_tasks_and_queues_raise_not_found(service: Service) -> None:
    with pytest.raises(TaskNotFound):
        await service.tasks.get_task("task_missing")
    with pytest.raises(QueueNotFound):
        await service.queues.resume_queue("missing")


async def test_an_enqueue_in_flight_when_the_service_stops_is_answered(database_url: str) -> None:
    service = Service(settings_for(database_url))
    await service.start()
    tasks = [new() for _ in range(20)]
    enqueues = [asyncio.create_task(service.tasks.enqueue([task])) for task in tasks]
    await asyncio.sleep(0)  # they are in the group committer now
    await service.stop()
    answers = await asyncio.gather(*enqueues)
    assert [answer[0].task.id for answer in answers] == [task.id for task in tasks]
    assert all(answer[0].created for answer in answers)


async def test_stop_now_before_the_stop_holds_for_it_and_not_for_the_next(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A second Ctrl-C can come before the stop has begun, even before the service has started
    (the server's signal handlers are in place from its first moment): the stop that follows
    waits for no delivery. Stopped, the service forgets it: started again, it waits again."""
    caplog.set_level(logging.INFO, logger="workly.dispatch")
    settings = settings_for(database_url, dispatch=True, shutdown_grace=30, outbound_allow="127.0.0.0/8")
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.hold("/held")
        try:
            service = Service(settings)
            service.stop_now()
            await service.start()
            [abandoned] = await service.tasks.enqueue([new(url=receiver.url("/held"))])
            await receiver.wait_for("/held", 1)
            async with asyncio.timeout(10):  # not the 30 s grace
                await service.stop()
            await service.start()
            [waited_for] = await service.tasks.enqueue([new(url=receiver.url("/held"))])
            await receiver.wait_for("/held", 2)
            stopping = asyncio.create_task(service.stop())
            async with asyncio.timeout(10):
                while "stopping: waiting up to 30s for 1 deliveries" not in caplog.text:
                    await asyncio.sleep(0.01)
            receiver.release("/held")
            await stopping
        finally:
            receiver.release("/held")
    async with Service(settings_for(database_url)).running() as stopped:
        assert (await stopped.tasks.get_task(abandoned.task.id)).status == "running"  # leased: the reaper's
        assert (await stopped.tasks.get_task(waited_for.task.id)).status == "succeeded"


async def test_changes_that_make_work_claimable_wake_the_dispatcher(database_url: str) -> None:
    async with Service(settings_for(database_url, dispatch=True, poll_interval=3600)).running() as service:
        woken = 0
        wake = service.dispatcher.wake

        def counting_wake() -> None:
            nonlocal woken
            woken += 1
            wake()

        service.dispatcher.wake = counting_wake  # type: ignore[method-assign]
        steps = [
            ("put", service.queues.put_queue("q", QueueConfig(paused=True)), 1),  # a put may raise limits
            ("pause", service.queues.pause_queue("q"), 0),
            ("resume", service.queues.resume_queue("q"), 1),
            ("patch", service.queues.update_queue("q", {"max_concurrency": 5}), 1),
            ("pause", service.queues.pause_queue("q"), 0),  # so the dispatcher leaves the task alone
            ("enqueue", service.tasks.enqueue([new(queue="q")]), 1),
        ]
        for name, step, wakes in steps:
            before = woken
            result = await step
            assert woken - before == wakes, name
        [stored] = result  # type: ignore[misc]
        await service.tasks.cancel_task(stored.task.id)
        before = woken
        await service.tasks.retry_task(stored.task.id)
        assert woken == before + 1


async def test_migrate_database_applies_then_reports_up_to_date(sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url)  # no signing secret: migrating needs none
    applied, version = await migrate_database(settings)
    assert applied == list(range(1, version + 1))
    assert await migrate_database(settings) == ([], version)


async def test_outbound_settings_that_cannot_be_used_stop_the_start_before_the_database_opens(
    sqlite_url: str,
) -> None:
    opened: list[Settings] = []

    async def opener(settings: Settings) -> Storage:
        opened.append(settings)
        raise AssertionError("the storage must not be opened")

    service = Service(settings_for(sqlite_url, outbound_ca_file="/nonexistent/ca.pem"), storage_opener=opener)
    with pytest.raises(ConfigError, match="WORKLY_OUTBOUND_CA_FILE"):
        await service.start()
    assert opened == []


async def test_a_start_that_fails_leaves_nothing_running(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upkeep asks the database whether to vacuum; an error there fails the start, and what
    had begun (the dispatcher, its heartbeat, any upkeep loop) is stopped with it."""
    closed: list[Storage] = []

    async def opener(settings: Settings) -> Storage:
        storage = await open_storage(sqlite_url)

        async def refused() -> bool:
            raise StorageUnavailable("the database went away")

        monkeypatch.setattr(storage.database, "needs_vacuum", refused)
        closed.append(storage)
        return storage

    before = asyncio.all_tasks()
    service = Service(settings_for(sqlite_url, dispatch=True, vacuum_interval=None), storage_opener=opener)
    with pytest.raises(StorageUnavailable):
        await service.start()
    left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    assert left == [], [t.get_name() for t in left]
    assert closed
