"""Bulk operation routes and the failure-handling fields of tasks, queues and endpoints, as
the API answers them (docs/failures.md). The dispatcher, and with it the operation runner,
does not run here: operations stay ``running``, which is what these tests read."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import HOOK, Api, assert_problem


async def create(api: Api, body: dict[str, Any], expect: int = 202) -> dict[str, Any]:
    response = await api.http.post("/v1/operations", json=body)
    assert response.status_code == expect, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_an_operation_is_answered_202_with_its_fields(api: Api) -> None:
    await api.enqueue()
    operation = await create(
        api, {"action": "cancel", "filter": {"queue": "q", "created_after": "2020-01-01T01:00:00+01:00"}}
    )
    assert set(operation) == {
        "id", "action", "filter", "state", "matched", "changed", "skipped", "error", "created_at",
        "updated_at", "finished_at",
    }  # fmt: skip
    assert operation["id"].startswith("op_")
    assert (operation["action"], operation["state"], operation["matched"]) == ("cancel", "running", 1)
    assert operation["filter"] == {"queue": "q", "created_after": "2020-01-01T00:00:00Z"}
    assert (operation["changed"], operation["skipped"], operation["finished_at"]) == (0, 0, None)
    fetched = await api.http.get(f"/v1/operations/{operation['id']}")
    assert fetched.status_code == 200 and fetched.json() == operation


async def test_operations_list_newest_first_with_a_cursor(api: Api) -> None:
    ids = [(await create(api, {"action": "retry", "filter": {"status": "failed"}}))["id"] for _ in range(3)]
    first = (await api.http.get("/v1/operations", params={"limit": 2})).json()
    assert [op["id"] for op in first["operations"]] == ids[::-1][:2]
    rest = (await api.http.get("/v1/operations", params={"cursor": first["next_cursor"]})).json()
    assert ([op["id"] for op in rest["operations"]], rest["next_cursor"]) == ([ids[0]], None)
    assert_problem(await api.http.get("/v1/operations", params={"cursor": "nope"}), 400, "bad-cursor")
    assert_problem(await api.http.get("/v1/operations", params={"limit": 501}), 422)


@pytest.mark.parametrize(
    "body",
    [
        {"action": "delete", "filter": {"queue": "q"}},  # unknown action
        {"filter": {"queue": "q"}},  # no action
        {"action": "retry"},  # no filter
        {"action": "retry", "filter": {}},  # an empty filter: never every task
        {"action": "retry", "filter": {"queue": None, "status": None}},  # empty too
        {"action": "retry", "filter": {"queue": "q", "colour": "red"}},  # unknown filter field
        {"action": "retry", "filter": {"queue": "q"}, "dry_run": True},  # unknown field
        {"action": "retry", "filter": {"created_after": "yesterday"}},  # bad time formats
        {"action": "retry", "filter": {"created_before": "2030-01-01T00:00:00"}},  # no offset
        {"action": "retry", "filter": {"created_after": "2030-13-01T00:00:00Z"}},
        {"action": "retry", "filter": {"created_after": "0001-01-01T00:00:00+01:00"}},
        {"action": "retry", "filter": {"status": "done"}},
        {"action": "retry", "filter": {"last_status_code": 999}},
        {"action": "retry", "filter": {"queue": "no spaces"}},
        {"action": "retry", "filter": {"event_type": "not a type"}},
        {"action": "retry", "filter": {"endpoint_id": "../../docs"}},
        {"action": "retry", "filter": "queue=q"},
        [],
    ],
)
async def test_bad_operations_are_refused_and_store_nothing(api: Api, body: Any) -> None:
    await api.enqueue()
    assert_problem(await api.http.post("/v1/operations", json=body), 422)
    assert (await api.http.get("/v1/operations")).json()["operations"] == []
    assert (await api.counts())["ready"] == 1


async def test_a_time_problem_names_its_field_and_an_empty_window_is_refused(api: Api) -> None:
    body = {"action": "retry", "filter": {"created_after": "2026-12-01T09:00:00"}}
    problem = assert_problem(await api.http.post("/v1/operations", json=body), 422)
    assert "created_after needs a UTC offset" in problem["detail"] and "run_at" not in problem["detail"]
    window = {"created_after": "2030-01-02T00:00:00Z", "created_before": "2030-01-01T00:00:00Z"}
    problem = assert_problem(
        await api.http.post("/v1/operations", json={"action": "cancel", "filter": window}), 422
    )
    assert "created_after must come before created_before" in problem["detail"]


async def test_an_empty_filter_names_what_it_needs(api: Api) -> None:
    problem = assert_problem(
        await api.http.post("/v1/operations", json={"action": "retry", "filter": {}}), 422
    )
    assert "at least one field" in problem["detail"]


async def test_an_unknown_operation_is_404(api: Api) -> None:
    assert_problem(await api.http.get("/v1/operations/op_missing"), 404, "not-found")
    assert_problem(await api.http.get("/v1/operations/op%00x"), 404, "not-found")


# --- the retry policy's fields --------------------------------------------------------------


async def test_a_task_shows_its_policy_and_callbacks(api: Api) -> None:
    task = await api.enqueue(
        stop_on=["4xx", "503", "4xx"], deadline=90, min_backoff=2, max_backoff=8,
        callback_url="https://example.com/done", failure_callback_url="https://example.com/failed",
    )  # fmt: skip
    assert (task["stop_on"], task["deadline"], task["min_backoff"], task["max_backoff"]) == (
        ["4xx", "503"],
        90,
        2,
        8,
    )
    assert (task["callback_url"], task["failure_callback_url"], task["callback_of"]) == (
        "https://example.com/done",
        "https://example.com/failed",
        None,
    )
    plain = await api.enqueue()
    assert (plain["stop_on"], plain["deadline"], plain["min_backoff"], plain["max_backoff"]) == (
        ["410"],
        None,
        1,
        3600,
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"stop_on": ["200"]},
        {"stop_on": ["2xx"]},
        {"stop_on": ["4XX"]},
        {"stop_on": "4xx"},
        {"stop_on": [404]},
        {"deadline": 0},
        {"deadline": -1},
        {"deadline": 10**9},
        {"min_backoff": 10, "max_backoff": 5},
        {"min_backoff": -1},
        {"callback_url": "ftp://example.com/"},
        {"callback_url": "https://user:pw@example.com/"},
        {"failure_callback_url": "not a url"},
        {"callback_of": "task_x"},  # Workly's to set
    ],
)
async def test_bad_policy_fields_are_refused(api: Api, fields: dict[str, Any]) -> None:
    response = await api.http.post("/v1/queues/q/tasks", json={"url": HOOK, **fields})
    assert_problem(response, 422)
    assert await api.queue_names() == []


async def test_a_queue_policy_is_set_patched_and_removed(api: Api) -> None:
    created = await api.http.put("/v1/queues/q", json={"stop_on": ["404", "5xx"], "deadline": 600})
    assert created.status_code == 201
    assert (created.json()["stop_on"], created.json()["deadline"]) == (["404", "5xx"], 600)
    assert (await api.enqueue())["stop_on"] == ["404", "5xx"]  # inherited
    patched = await api.http.patch("/v1/queues/q", json={"deadline": None, "stop_on": []})
    assert (patched.json()["stop_on"], patched.json()["deadline"]) == ([], None)
    defaults = await api.http.put("/v1/queues/q", json={})
    assert (defaults.json()["stop_on"], defaults.json()["deadline"]) == (["410"], None)
    assert_problem(await api.http.patch("/v1/queues/q", json={"stop_on": None}), 422)
    assert_problem(await api.http.patch("/v1/queues/q", json={"stop_on": ["1xx"]}), 422)


async def test_an_endpoint_has_a_retry_policy(api: Api) -> None:
    created = await api.http.post("/v1/endpoints", json={"url": HOOK, "stop_on": ["4xx"], "deadline": 3600})
    assert created.status_code == 201, created.text
    endpoint = created.json()
    assert (endpoint["stop_on"], endpoint["deadline"]) == (["4xx"], 3600)
    patched = await api.http.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"stop_on": ["410", "404"], "deadline": None}
    )
    assert (patched.json()["stop_on"], patched.json()["deadline"]) == (["410", "404"], None)
    assert_problem(await api.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"stop_on": ["200"]}), 422)


async def test_an_event_takes_callbacks(api: Api) -> None:
    await api.http.post("/v1/endpoints", json={"url": HOOK})
    published = await api.http.post(
        "/v1/events", json={"type": "a.b", "payload": 1, "callback_url": "https://example.com/cb"}
    )
    assert published.status_code == 201
    [delivery] = published.json()["deliveries"]
    assert (await api.task(delivery["task_id"]))["callback_url"] == "https://example.com/cb"
    assert_problem(
        await api.http.post("/v1/events", json={"type": "a.b", "payload": 1, "callback_url": "x"}), 422
    )
