"""Names Workly keeps for itself (workly/reserved_names.py) are refused to clients with a 422
problem, and nothing is stored: a task for a ``workly.*`` queue (its callbacks', signed by
Workly), an idempotency key ``schedule:…`` (its schedules' firings') on a task or an event, a
schedule whose task goes to a ``workly.*`` queue. Configuring such a queue stays allowed."""

from __future__ import annotations

import pytest

from tests.api.conftest import HOOK, Api, assert_problem

FIRING_KEY = "schedule:sch_01ARZ3NDEKTSV4RRFFQ69G5FAV:2026-12-07T00:00:00Z"


@pytest.mark.parametrize("queue", ["workly.callbacks", "workly.anything"])
async def test_a_task_for_one_of_workly_s_queues_is_refused(api: Api, queue: str) -> None:
    one = await api.http.post(f"/v1/queues/{queue}/tasks", json={"url": HOOK})
    assert "'workly.'" in assert_problem(one, 422, "reserved-name")["detail"]
    batch = await api.http.post(f"/v1/queues/{queue}/tasks/batch", json={"tasks": [{"url": HOOK}]})
    assert_problem(batch, 422, "reserved-name")
    assert queue not in await api.queue_names()


async def test_a_firing_s_idempotency_key_is_refused_on_a_task_and_an_event(api: Api) -> None:
    in_body = await api.http.post("/v1/queues/q/tasks", json={"url": HOOK, "idempotency_key": FIRING_KEY})
    assert "'schedule:'" in assert_problem(in_body, 422, "reserved-name")["detail"]
    in_header = await api.http.post(
        "/v1/queues/q/tasks", json={"url": HOOK}, headers={"idempotency-key": FIRING_KEY}
    )
    assert_problem(in_header, 422, "reserved-name")
    batch = await api.http.post(
        "/v1/queues/q/tasks/batch",
        json={"tasks": [{"url": HOOK}, {"url": HOOK, "idempotency_key": FIRING_KEY}]},
    )
    assert_problem(batch, 422, "reserved-name")
    event = await api.http.post(
        "/v1/events", json={"type": "t", "payload": {}, "idempotency_key": FIRING_KEY}
    )
    assert_problem(event, 422, "reserved-name")
    assert (await api.http.get("/v1/events")).json()["events"] == []
    assert "q" not in await api.queue_names()
    # A key that only contains the word is a client's.
    await api.enqueue(idempotency_key="my-schedule:1")


async def test_a_schedule_into_one_of_workly_s_queues_is_refused(api: Api) -> None:
    body = {"name": "s", "cron": "* * * * *", "queue": "workly.callbacks", "task": {"url": HOOK}}
    assert_problem(await api.http.post("/v1/schedules", json=body), 422, "reserved-name")
    assert (await api.http.get("/v1/schedules")).json()["schedules"] == []


async def test_one_of_workly_s_queues_may_still_be_configured(api: Api) -> None:
    response = await api.http.put("/v1/queues/workly.callbacks", json={"rate_limit": 5})
    assert response.status_code in (200, 201), response.text
    assert (await api.queue("workly.callbacks"))["rate_limit"] == 5
