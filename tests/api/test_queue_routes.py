"""Queue routes of API v1, in-process (the real service and app), on SQLite and on PostgreSQL.

List, read, create/replace (PUT), update (PATCH), delete, pause, resume, purge.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.conftest import Api, assert_problem

DEFAULTS = {
    "max_concurrency": 3,
    "rate_limit": None,
    "max_attempts": 10,
    "min_backoff": 1.0,
    "max_backoff": 3600.0,
    "timeout": 30.0,
    "ordering": "none",
    "paused": False,
}
CUSTOM = {
    "max_concurrency": 25,
    "rate_limit": 12.5,
    "max_attempts": 4,
    "min_backoff": 0.5,
    "max_backoff": 60.0,
    "timeout": 5.0,
    "ordering": "key",
    "paused": True,
}
NO_TASKS = {"ready": 0, "running": 0, "succeeded": 0, "failed": 0, "canceled": 0}


def config(queue: dict[str, Any]) -> dict[str, Any]:
    return {name: queue[name] for name in DEFAULTS}


async def put(api: Api, name: str, body: dict[str, Any], expect: int) -> dict[str, Any]:
    response = await api.http.put(f"/v1/queues/{name}", json=body)
    assert response.status_code == expect, response.text
    queue: dict[str, Any] = response.json()
    return queue


async def patch(api: Api, name: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.http.patch(f"/v1/queues/{name}", json=body)
    assert response.status_code == 200, response.text
    queue: dict[str, Any] = response.json()
    return queue


async def cancel(api: Api, task_id: str) -> None:
    assert (await api.http.post(f"/v1/tasks/{task_id}/cancel")).status_code == 200


# --- read ----------------------------------------------------------------------------------


async def test_no_queues_at_first(api: Api) -> None:
    response = await api.http.get("/v1/queues")
    assert response.status_code == 200
    assert response.json() == {"queues": []}


async def test_first_enqueue_creates_the_queue_with_defaults(api: Api) -> None:
    await api.enqueue("fresh")
    queue = await api.queue("fresh")
    assert queue["name"] == "fresh"
    assert config(queue) == DEFAULTS
    assert queue["counts"] == {**NO_TASKS, "ready": 1}
    assert queue["created_at"].endswith("Z") and queue["updated_at"].endswith("Z")


async def test_queues_are_listed_by_name_with_counts_per_status(api: Api) -> None:
    b_tasks = [(await api.enqueue("b"))["id"] for _ in range(3)]
    await cancel(api, b_tasks[0])
    await api.enqueue("a", delay=600)  # delayed tasks are ready too
    await put(api, "c", {}, 201)
    response = await api.http.get("/v1/queues")
    assert response.status_code == 200
    queues = response.json()["queues"]
    assert [q["name"] for q in queues] == ["a", "b", "c"]
    assert [q["counts"] for q in queues] == [
        {**NO_TASKS, "ready": 1},
        {**NO_TASKS, "ready": 2, "canceled": 1},
        NO_TASKS,
    ]
    assert queues[1] == await api.queue("b")


# --- PUT -----------------------------------------------------------------------------------


async def test_put_creates_with_201_and_replaces_with_200(api: Api) -> None:
    created = await put(api, "q", CUSTOM, 201)
    assert config(created) == CUSTOM
    assert created["counts"] == NO_TASKS
    assert config(await api.queue("q")) == CUSTOM

    replaced = await put(api, "q", {"max_attempts": 7}, 200)
    assert config(replaced) == {**DEFAULTS, "max_attempts": 7}  # left out: back to the defaults
    assert replaced["created_at"] == created["created_at"]
    assert config(await api.queue("q")) == {**DEFAULTS, "max_attempts": 7}


async def test_put_with_an_empty_body_takes_every_default(api: Api) -> None:
    assert config(await put(api, "q", {}, 201)) == DEFAULTS


async def test_put_on_a_queue_made_by_enqueue_keeps_its_tasks(api: Api) -> None:
    task = await api.enqueue()
    queue = await put(api, "q", {"max_concurrency": 1}, 200)
    assert queue["counts"]["ready"] == 1
    assert (await api.task(task["id"]))["status"] == "ready"


BAD_CONFIGS: dict[str, dict[str, Any]] = {
    "max_concurrency 0": {"max_concurrency": 0},
    "max_concurrency a word": {"max_concurrency": "many"},
    "rate_limit 0": {"rate_limit": 0},
    "rate_limit negative": {"rate_limit": -1},
    "rate_limit subnormal": {"rate_limit": 1e-309},  # overflowed PostgreSQL's claim arithmetic
    "rate_limit under one per 11.6 days": {"rate_limit": 9.9e-7},
    "max_attempts 0": {"max_attempts": 0},
    "min_backoff negative": {"min_backoff": -1},
    "min_backoff above max_backoff": {"min_backoff": 10, "max_backoff": 5},
    "min_backoff above the default max": {"min_backoff": 7200},
    "timeout 0": {"timeout": 0},
    "unknown ordering": {"ordering": "fifo"},
    "paused not a boolean": {"paused": "maybe"},
    "unknown field": {"concurrency": 5},
    "not an object": [],
}


@pytest.mark.parametrize("body", BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
async def test_bad_put_is_422_and_changes_nothing(api: Api, body: Any) -> None:
    assert_problem(await api.http.put("/v1/queues/new", json=body), 422)
    assert await api.queue_names() == []
    before = await put(api, "old", CUSTOM, 201)
    assert_problem(await api.http.put("/v1/queues/old", json=body), 422)
    assert await api.queue("old") == before


# --- PATCH ---------------------------------------------------------------------------------


async def test_patch_changes_only_the_fields_given(api: Api) -> None:
    before = await put(api, "q", CUSTOM, 201)
    after = await patch(api, "q", {"max_concurrency": 2, "paused": False})
    assert config(after) == {**CUSTOM, "max_concurrency": 2, "paused": False}
    assert after["created_at"] == before["created_at"]
    assert after["updated_at"] >= before["updated_at"]
    assert config(await api.queue("q")) == config(after)
    assert config(await patch(api, "q", {})) == config(after)


async def test_patch_can_set_and_clear_the_rate_limit(api: Api) -> None:
    await api.enqueue()
    assert (await patch(api, "q", {"rate_limit": 50}))["rate_limit"] == 50.0
    cleared = await patch(api, "q", {"rate_limit": None})
    assert config(cleared) == DEFAULTS
    assert (await api.queue())["rate_limit"] is None


PATCH_REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "min above max in one patch": ({"min_backoff": 100, "max_backoff": 50}, "invalid-queue-config"),
    "min above the stored max": ({"min_backoff": 61}, "invalid-queue-config"),
    "max below the stored min": ({"max_backoff": 0.25}, "invalid-queue-config"),
    "null max_concurrency": ({"max_concurrency": None}, "validation"),
    "null paused": ({"paused": None}, "validation"),
    "max_concurrency 0": ({"max_concurrency": 0}, "validation"),
    "unknown field": ({"name": "other"}, "validation"),
}


@pytest.mark.parametrize(("body", "slug"), PATCH_REFUSED.values(), ids=PATCH_REFUSED.keys())
async def test_refused_patch_changes_nothing(api: Api, body: dict[str, Any], slug: str) -> None:
    before = await put(api, "q", CUSTOM, 201)  # min_backoff 0.5, max_backoff 60
    assert_problem(await api.http.patch("/v1/queues/q", json=body), 422, slug)
    assert await api.queue("q") == before


# --- DELETE --------------------------------------------------------------------------------


async def test_delete_removes_the_queue_and_its_tasks(api: Api) -> None:
    doomed = [(await api.enqueue("doomed"))["id"] for _ in range(3)]
    await cancel(api, doomed[0])
    await patch(api, "doomed", {"max_attempts": 2})
    kept = await api.enqueue("kept")

    response = await api.http.delete("/v1/queues/doomed")
    assert response.status_code == 204
    assert response.content == b""
    assert_problem(await api.http.get("/v1/queues/doomed"), 404, "not-found")
    assert_problem(await api.http.get("/v1/queues/doomed/tasks"), 404, "not-found")
    for task_id in doomed:
        assert_problem(await api.http.get(f"/v1/tasks/{task_id}"), 404, "not-found")
    assert await api.queue_names() == ["kept"]
    assert await api.task(kept["id"]) == kept
    assert_problem(await api.http.delete("/v1/queues/doomed"), 404, "not-found")

    # The name is free again: a new queue with defaults, none of the old tasks.
    await api.enqueue("doomed")
    queue = await api.queue("doomed")
    assert (config(queue), queue["counts"]) == (DEFAULTS, {**NO_TASKS, "ready": 1})


# --- pause, resume, purge -----------------------------------------------------------------------


async def test_pause_and_resume_set_the_paused_flag(api: Api) -> None:
    await api.enqueue()
    for _ in range(2):  # pausing a paused queue is fine
        paused = await api.http.post("/v1/queues/q/pause")
        assert paused.status_code == 200
        assert paused.json()["paused"] is True
    assert (await api.queue())["paused"] is True
    await api.enqueue()  # a paused queue still accepts tasks
    assert (await api.counts())["ready"] == 2

    resumed = await api.http.post("/v1/queues/q/resume")
    assert resumed.status_code == 200
    assert config(resumed.json()) == DEFAULTS
    assert (await api.queue())["paused"] is False


async def test_purge_removes_only_ready_tasks(api: Api) -> None:
    ready = [(await api.enqueue())["id"], (await api.enqueue(delay=3600))["id"]]
    canceled = (await api.enqueue())["id"]
    await cancel(api, canceled)
    other = await api.enqueue("other")

    response = await api.http.post("/v1/queues/q/purge")
    assert response.status_code == 200
    assert response.json() == {"purged": 2}
    assert await api.counts() == {**NO_TASKS, "canceled": 1}
    for task_id in ready:
        assert_problem(await api.http.get(f"/v1/tasks/{task_id}"), 404, "not-found")
    assert (await api.task(canceled))["status"] == "canceled"
    assert await api.task(other["id"]) == other
    assert config(await api.queue()) == DEFAULTS  # the queue itself stays

    again = await api.http.post("/v1/queues/q/purge")
    assert (again.status_code, again.json()) == (200, {"purged": 0})


# --- unknown queues ------------------------------------------------------------------------------

UNKNOWN_QUEUE_ROUTES = [
    ("GET", "/v1/queues/ghost", None),
    ("GET", "/v1/queues/ghost/tasks", None),
    ("PATCH", "/v1/queues/ghost", {"paused": True}),
    ("PATCH", "/v1/queues/ghost", {}),
    ("DELETE", "/v1/queues/ghost", None),
    ("POST", "/v1/queues/ghost/pause", None),
    ("POST", "/v1/queues/ghost/resume", None),
    ("POST", "/v1/queues/ghost/purge", None),
]


@pytest.mark.parametrize(
    ("method", "path", "body"), UNKNOWN_QUEUE_ROUTES, ids=[f"{m} {p} {b}" for m, p, b in UNKNOWN_QUEUE_ROUTES]
)
async def test_unknown_queue_is_404_and_is_not_created(api: Api, method: str, path: str, body: Any) -> None:
    await api.enqueue("real")
    problem = assert_problem(await api.http.request(method, path, json=body), 404, "not-found")
    assert "ghost" in problem["detail"]
    assert await api.queue_names() == ["real"]


async def test_a_queue_signing_secret_is_write_only(api: Api) -> None:
    secret = "whsec_cXVldWUtc2VjcmV0LTAxMjM0NTY3ODk="
    response = await api.http.put("/v1/queues/signed", json={"signing_secret": secret})
    assert response.status_code == 201, response.text
    assert response.json()["has_signing_secret"] is True
    for shown in [response, await api.http.get("/v1/queues/signed"), await api.http.get("/v1/queues")]:
        assert "cXVldWUtc2VjcmV0" not in shown.text
    patched = await api.http.patch("/v1/queues/signed", json={"signing_secret": None})
    assert patched.json()["has_signing_secret"] is False


@pytest.mark.parametrize("secret", ["not-a-secret", "whsec_c2hvcnQ=", "whsec_ok=== whsec_!!", ""])
async def test_an_invalid_queue_signing_secret_is_422_without_echoing_it(api: Api, secret: str) -> None:
    response = await api.http.put("/v1/queues/signed", json={"signing_secret": secret})
    body = assert_problem(response, 422)
    assert secret not in json.dumps(body) or secret == ""
    assert "signed" not in await api.queue_names()
