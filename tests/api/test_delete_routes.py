"""DELETE /v1/tasks/{id} and DELETE /v1/events/{id} (docs/retention.md), on both backends:
what goes with them, what stays, and the 404s and 409s that change nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from tests.api.conftest import HOOK, assert_problem
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.service import Service


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    async with in_process(settings) as (service, http):
        yield service, http


async def claim_all(service: Service) -> list[str]:
    claimed = await service.storage.dispatch.claim_tasks(100, datetime.now(UTC), uuid.uuid4().hex, 30.0)
    return [task.id for task in claimed.tasks]


async def test_a_deleted_task_is_gone_with_its_attempts(world: tuple[Service, httpx.AsyncClient]) -> None:
    _, http = world
    doomed = (await http.post("/v1/queues/q/tasks", json={"url": HOOK})).json()
    kept = (await http.post("/v1/queues/q/tasks", json={"url": HOOK})).json()
    response = await http.delete(f"/v1/tasks/{doomed['id']}")
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert_problem(await http.get(f"/v1/tasks/{doomed['id']}"), 404)
    assert_problem(await http.get(f"/v1/tasks/{doomed['id']}/attempts"), 404)
    assert (await http.get(f"/v1/tasks/{kept['id']}")).status_code == 200
    assert (await http.get("/v1/queues/q")).json()["counts"]["ready"] == 1
    assert_problem(await http.delete(f"/v1/tasks/{doomed['id']}"), 404)  # a second time


async def test_a_running_task_is_not_deleted(world: tuple[Service, httpx.AsyncClient]) -> None:
    service, http = world
    task = (await http.post("/v1/queues/q/tasks", json={"url": HOOK})).json()
    assert await claim_all(service) == [task["id"]]
    body = assert_problem(await http.delete(f"/v1/tasks/{task['id']}"), 409, "conflict")
    assert "being sent" in body["detail"]
    assert (await http.get(f"/v1/tasks/{task['id']}")).json()["status"] == "running"


async def test_a_deleted_event_takes_its_deliveries(world: tuple[Service, httpx.AsyncClient]) -> None:
    _, http = world
    for _ in range(2):
        assert (await http.post("/v1/endpoints", json={"url": HOOK})).status_code == 201
    doomed = (await http.post("/v1/events", json={"type": "invoice.paid", "payload": {"n": 1}})).json()
    kept = (await http.post("/v1/events", json={"type": "invoice.paid", "payload": {"n": 2}})).json()
    assert len(doomed["deliveries"]) == 2
    response = await http.delete(f"/v1/events/{doomed['id']}")
    assert response.status_code == 204, response.text
    assert_problem(await http.get(f"/v1/events/{doomed['id']}"), 404)
    for delivery in doomed["deliveries"]:
        assert_problem(await http.get(f"/v1/tasks/{delivery['task_id']}"), 404)
    again = await http.get(f"/v1/events/{kept['id']}")
    assert again.status_code == 200 and len(again.json()["deliveries"]) == 2
    assert_problem(await http.delete(f"/v1/events/{doomed['id']}"), 404)
    assert_problem(await http.delete("/v1/events/evt_nope"), 404)


async def test_an_event_with_a_delivery_in_flight_is_not_deleted(
    world: tuple[Service, httpx.AsyncClient],
) -> None:
    service, http = world
    assert (await http.post("/v1/endpoints", json={"url": HOOK})).status_code == 201
    event = (await http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})).json()
    [delivery] = await claim_all(service)
    body = assert_problem(await http.delete(f"/v1/events/{event['id']}"), 409, "conflict")
    assert delivery in body["detail"]
    stored = (await http.get(f"/v1/events/{event['id']}")).json()
    assert [d["task_id"] for d in stored["deliveries"]] == [delivery]
