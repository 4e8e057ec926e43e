"""Failure handling delivered for real: a service with its dispatcher, receivers on
127.0.0.1, both backends. Retry policies (stop_on, deadline), retry now, continuous attempt
numbers, callbacks (signed, once, the response bytes exact), and a bulk retry."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.support.receiver import Receiver, running_receiver
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.service import Service


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver(secret=TEST_SECRET) as receiver:
        yield receiver


@pytest.fixture
async def workly(database_url: str) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings = Settings(
        database_url=database_url,
        signing_secret=TEST_SECRET,
        outbound_allow="127.0.0.0/8",
        poll_interval=0.2,
        breaker_threshold=1000,  # these tests fail receivers on purpose: no breaker in the way
    )
    async with in_process(settings) as running:
        yield running


async def enqueue(http: httpx.AsyncClient, url: str, queue: str = "q", **fields: Any) -> dict[str, Any]:
    response = await http.post(f"/v1/queues/{queue}/tasks", json={"url": url, **fields})
    assert response.status_code == 201, response.text
    task: dict[str, Any] = response.json()
    return task


async def until(
    http: httpx.AsyncClient, task_id: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The task, once ``done`` holds for it (polled; the suite's timeout bounds the wait)."""
    while True:
        task: dict[str, Any] = (await http.get(f"/v1/tasks/{task_id}")).json()
        if done(task):
            return task
        await asyncio.sleep(0.02)


async def settled(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    return await until(http, task_id, lambda t: t["status"] in ("succeeded", "failed", "canceled"))


async def attempts_of(http: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
    attempts: list[dict[str, Any]] = (await http.get(f"/v1/tasks/{task_id}/attempts")).json()["attempts"]
    return attempts


async def test_stop_on_4xx_fails_a_404_at_once_but_retries_a_429(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    receiver.script("/gone", [404, 204])
    receiver.script("/busy", [429, 204])
    gone = await enqueue(http, receiver.url("/gone"), stop_on=["4xx"], min_backoff=0.05, max_backoff=0.05)
    busy = await enqueue(http, receiver.url("/busy"), stop_on=["4xx"], min_backoff=0.05, max_backoff=0.05)
    assert gone["stop_on"] == ["4xx"]
    failed = await settled(http, gone["id"])
    assert (failed["status"], failed["attempts"], failed["last_status_code"]) == ("failed", 1, 404)
    assert failed["last_error"] == "HTTP 404: listed in stop_on, not retried"
    delivered = await settled(http, busy["id"])
    assert (delivered["status"], delivered["attempts"]) == ("succeeded", 2)
    assert len(receiver.at("/gone")) == 1


async def test_a_queue_stop_on_applies_unless_the_task_overrides_it(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    response = await http.put(
        "/v1/queues/strict", json={"stop_on": ["404", "5xx"], "min_backoff": 0.05, "max_backoff": 0.05}
    )
    assert response.status_code == 201 and response.json()["stop_on"] == ["404", "5xx"]
    receiver.script("/a", [503])
    receiver.script("/b", [503, 204])
    inherits = await enqueue(http, receiver.url("/a"), queue="strict")
    overrides = await enqueue(http, receiver.url("/b"), queue="strict", stop_on=["410"])
    assert (await settled(http, inherits["id"]))["attempts"] == 1
    assert (await settled(http, overrides["id"]))["status"] == "succeeded"


async def test_a_deadline_stops_retries(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    receiver.script("/down", [500] * 100)
    task = await enqueue(
        # Room for a second attempt on a loaded machine (parallel tests): 1.5 s, 0.1 s apart.
        http,
        receiver.url("/down"),
        deadline=1.5,
        min_backoff=0.1,
        max_backoff=0.1,
        max_attempts=100,
    )
    failed = await settled(http, task["id"])
    assert failed["status"] == "failed"
    assert failed["last_error"].startswith("deadline passed")
    assert 2 <= failed["attempts"] < 100
    attempts = await attempts_of(http, task["id"])
    assert len(attempts) == failed["attempts"]
    # No attempt started after the deadline (created_at + 1.5 s).
    deadline = datetime.fromisoformat(failed["created_at"]) + timedelta(seconds=1.5)
    assert all(datetime.fromisoformat(a["started_at"]) < deadline for a in attempts)


async def test_retry_makes_a_waiting_task_due_now_and_attempts_number_on(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    receiver.script("/flaky", [500, 500, 204])
    task = await enqueue(http, receiver.url("/flaky"), min_backoff=3600, max_backoff=3600, max_attempts=2)
    waiting = await until(http, task["id"], lambda t: t["attempts"] == 1 and t["status"] == "ready")
    response = await http.post(f"/v1/tasks/{task['id']}/retry")
    assert response.status_code == 200, response.text
    failed = await settled(http, task["id"])  # attempt 2 ran at once, and was the last
    assert (failed["status"], failed["attempts"]) == ("failed", 2)
    assert waiting["run_at"] > failed["updated_at"]  # it was waiting an hour: retry made it due now
    redriven = await http.post(f"/v1/tasks/{task['id']}/retry")
    assert redriven.status_code == 200
    delivered = await settled(http, task["id"])
    assert (delivered["status"], delivered["attempts"]) == ("succeeded", 3)
    assert [a["attempt"] for a in await attempts_of(http, task["id"])] == [1, 2, 3]


async def test_a_failure_callback_arrives_once_signed_with_the_last_response(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    answer = bytes(range(256)) * 8  # not UTF-8: carried exactly, as base64
    receiver.answer_with("/api", answer)
    receiver.script("/api", [500, 502])
    task = await enqueue(
        http, receiver.url("/api"), max_attempts=2, min_backoff=0.05, max_backoff=0.05,
        failure_callback_url=receiver.url("/failed"), callback_url=receiver.url("/ok"),
    )  # fmt: skip
    [callback] = await receiver.wait_for("/failed", 1)
    assert callback.verified is True
    document = json.loads(callback.body)
    assert document["type"] == "workly.task.failed"
    assert (document["task"]["id"], document["task"]["status"], document["task"]["attempts"]) == (
        task["id"],
        "failed",
        2,
    )
    assert document["task"]["last_status_code"] == 502
    assert (document["attempt"]["attempt"], document["attempt"]["status_code"]) == (2, 502)
    assert base64.b64decode(document["response_base64"]) == answer
    # The callback is a task of its own, marked as this task's, with no callback itself.
    callback_task = await settled(http, callback.headers["webhook-id"])
    assert (callback_task["callback_of"], callback_task["queue"], callback_task["status"]) == (
        task["id"],
        "workly.callbacks",
        "succeeded",
    )
    assert (callback_task["callback_url"], callback_task["failure_callback_url"]) == (None, None)
    service, _ = workly
    await service.dispatcher.settle()
    assert len(receiver.at("/failed")) == 1 and receiver.at("/ok") == []


async def test_a_success_callback_carries_a_100_kib_response_exactly(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    answer = os.urandom(100 * 1024)
    receiver.answer_with("/api", answer)
    receiver.script("/api", [200])
    task = await enqueue(http, receiver.url("/api"), callback_url=receiver.url("/ok"))
    [callback] = await receiver.wait_for("/ok", 1)
    document = json.loads(callback.body)
    assert (document["type"], document["task"]["id"]) == ("workly.task.succeeded", task["id"])
    assert base64.b64decode(document["response_base64"]) == answer
    # A task without a callback keeps only the snippet of its answer.
    plain = await enqueue(http, receiver.url("/api"))
    receiver.script("/api", [200])
    await settled(http, plain["id"])
    [attempt] = await attempts_of(http, plain["id"])
    assert len(attempt["response"].encode("utf-8", "surrogateescape")) <= 2048 * 3


async def test_an_events_failure_callback_tells_of_each_failed_delivery(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    created = await http.post(
        "/v1/endpoints", json={"url": receiver.url("/ep"), "max_attempts": 1, "stop_on": ["5xx"]}
    )
    assert created.status_code == 201 and created.json()["stop_on"] == ["5xx"]
    receiver.script("/ep", [503])
    published = await http.post(
        "/v1/events",
        json={"type": "invoice.paid", "payload": {"n": 1}, "failure_callback_url": receiver.url("/failed")},
    )
    assert published.status_code == 201, published.text
    assert published.json()["failure_callback_url"] == receiver.url("/failed")
    [callback] = await receiver.wait_for("/failed", 1)
    document = json.loads(callback.body)
    assert document["task"]["event_id"] == published.json()["id"]
    assert document["task"]["endpoint_id"] == created.json()["id"]


async def test_a_bulk_retry_redrives_every_failed_task_once(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    await http.put("/v1/queues/bulk", json={"max_concurrency": 50})
    receiver.script("/bulk", [500] * 60)
    batch = {
        "tasks": [{"url": receiver.url("/bulk"), "max_attempts": 1, "body": {"n": n}} for n in range(60)]
    }
    assert (await http.post("/v1/queues/bulk/tasks/batch", json=batch)).status_code == 201
    await receiver.wait_for("/bulk", 60)
    while (await http.get("/v1/queues/bulk")).json()["counts"]["failed"] < 60:
        await asyncio.sleep(0.02)
    response = await http.post(
        "/v1/operations", json={"action": "retry", "filter": {"queue": "bulk", "status": "failed"}}
    )
    assert response.status_code == 202, response.text
    operation = response.json()
    assert response.headers["location"] == f"/v1/operations/{operation['id']}"
    assert (operation["state"], operation["matched"], operation["filter"]) == (
        "running",
        60,
        {"queue": "bulk", "status": "failed"},
    )
    while operation["state"] == "running":
        await asyncio.sleep(0.02)
        operation = (await http.get(f"/v1/operations/{operation['id']}")).json()
    assert (operation["state"], operation["changed"], operation["skipped"]) == ("succeeded", 60, 0)
    assert operation["finished_at"] is not None
    received = await receiver.wait_for("/bulk", 120)
    ids = [r.headers["webhook-id"] for r in received]
    assert all(ids.count(task_id) == 2 for task_id in set(ids)) and len(set(ids)) == 60
    listed = (await http.get("/v1/operations")).json()
    assert [op["id"] for op in listed["operations"]] == [operation["id"]]


async def test_only_the_last_attempt_of_a_task_with_a_callback_keeps_its_whole_response(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    """A task with a callback captures up to WORKLY_MAX_BODY_BYTES of each answer, but only the
    last attempt's is handed on: the attempts before it keep the 2 KB every attempt keeps."""
    _, http = workly
    answer = b"a" * 100_000
    receiver.answer_with("/big", answer)
    receiver.script("/big", [500, 503, 200])
    task = await enqueue(
        http, receiver.url("/big"), max_attempts=5, min_backoff=0.05, max_backoff=0.05,
        callback_url=receiver.url("/done"),
    )  # fmt: skip
    [callback] = await receiver.wait_for("/done", 1)
    assert base64.b64decode(json.loads(callback.body)["response_base64"]) == answer
    attempts = await attempts_of(http, task["id"])
    assert [(a["status_code"], len(a["response"])) for a in attempts] == [
        (500, 2048),
        (503, 2048),
        (200, 100_000),
    ]
