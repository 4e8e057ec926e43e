"""Task routes of API v1, in-process (the real service and app), on SQLite and on PostgreSQL.

Enqueue (one and batch, idempotency, body encoding, scheduling), read, attempts,
cancel, retry, and the cursor-paginated listing.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.conftest import HOOK, Api, assert_problem
from tests.support.bodies import stored_body


def parse_time(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


def ids(tasks: list[dict[str, Any]]) -> list[str]:
    return [task["id"] for task in tasks]


# --- enqueue one --------------------------------------------------------------------------


async def test_enqueue_returns_201_and_the_stored_task(api: Api) -> None:
    before = datetime.now(UTC)
    task = await api.enqueue("orders")
    assert task["id"].startswith("task_")
    assert task["queue"] == "orders"
    assert (task["status"], task["attempts"], task["max_attempts"]) == ("ready", 0, 10)
    assert (task["url"], task["method"], task["headers"]) == (HOOK, "POST", {})
    assert (task["priority"], task["key"], task["tenant"], task["idempotency_key"]) == (0, None, None, None)
    assert (task["body"], task["body_base64"], task["timeout"]) == (None, None, 30.0)
    assert (task["last_status_code"], task["last_error"]) == (None, None)
    created = parse_time(task["created_at"])
    assert before - timedelta(seconds=1) <= created <= datetime.now(UTC) + timedelta(seconds=1)
    assert task["run_at"] == task["created_at"] == task["updated_at"]
    assert await api.task(task["id"]) == task
    assert (await api.counts("orders"))["ready"] == 1


async def test_enqueue_keeps_every_request_field(api: Api) -> None:
    fields = {
        "method": "PUT",
        "headers": {"X-Trace": "abc", "Authorization": "Bearer t"},
        "priority": -7,
        "key": "customer-1",
        "tenant": "acme",
        "max_attempts": 3,
        "timeout": 2.5,
    }
    task = await api.enqueue(**fields)
    assert {name: task[name] for name in fields} == fields
    assert await api.task(task["id"]) == task


async def test_tasks_without_overrides_show_their_queue_settings(api: Api) -> None:
    put = await api.http.put("/v1/queues/q", json={"max_attempts": 4, "timeout": 9})
    assert put.status_code == 201
    plain = await api.enqueue()
    own = await api.enqueue(max_attempts=2, timeout=1.5)
    assert (plain["max_attempts"], plain["timeout"]) == (4, 9.0)
    assert (own["max_attempts"], own["timeout"]) == (2, 1.5)


# --- body encoding --------------------------------------------------------------------------


async def test_json_body_is_stored_as_compact_json_with_a_json_content_type(api: Api) -> None:
    task = await api.enqueue(body={"a": 1, "b": [1, 2]})
    assert stored_body(task) == b'{"a":1,"b":[1,2]}'
    assert task["headers"] == {"content-type": "application/json"}
    assert task["body"] == {"a": 1, "b": [1, 2]}
    assert stored_body(await api.task(task["id"])) == b'{"a":1,"b":[1,2]}'


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("hello", b'"hello"'),
        ({"name": "Zo\u00eb"}, '{"name":"Zo\u00eb"}'.encode()),
        (False, b"false"),
        (0, b"0"),
        ([], b"[]"),
    ],
)
async def test_any_json_value_is_sent_as_json(api: Api, body: Any, expected: bytes) -> None:
    task = await api.enqueue(body=body)
    assert stored_body(task) == expected
    assert task["headers"] == {"content-type": "application/json"}
    assert task["body"] == body


async def test_a_given_json_content_type_is_kept_and_not_duplicated(api: Api) -> None:
    headers = {"Content-Type": "application/cloudevents+json"}
    task = await api.enqueue(headers=headers, body={"x": [True, None]})
    assert task["headers"] == headers
    assert stored_body(task) == b'{"x":[true,null]}'


async def test_string_body_with_text_content_type_is_stored_as_utf8_text(api: Api) -> None:
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    task = await api.enqueue(headers=headers, body="h\u00e9llo, w\u00f6rld")
    assert stored_body(task) == "h\u00e9llo, w\u00f6rld".encode()
    assert task["headers"] == headers
    assert task["body"] == "h\u00e9llo, w\u00f6rld"


async def test_body_base64_stores_the_raw_bytes_exactly(api: Api) -> None:
    raw = bytes(range(256)) + b"\x00\xff"
    task = await api.enqueue(
        headers={"content-type": "application/octet-stream"}, body_base64=base64.b64encode(raw).decode()
    )
    assert stored_body(task) == raw
    assert stored_body(await api.task(task["id"])) == raw
    assert task["headers"] == {"content-type": "application/octet-stream"}
    assert task["body"] is None  # not UTF-8: only body_base64 shows it


async def test_no_body_stores_no_bytes_and_adds_no_header(api: Api) -> None:
    task = await api.enqueue(method="GET", body=None)
    assert (task["body_base64"], task["body"], task["headers"]) == (None, None, {})


# --- scheduling ----------------------------------------------------------------------------


async def test_delay_sets_run_at_to_now_plus_delay(api: Api) -> None:
    task = await api.enqueue(delay=90.5)
    run_at, created = parse_time(task["run_at"]), parse_time(task["created_at"])
    # created_at is the commit's time, run_at the request's plus the delay: a busy machine parts them.
    assert abs(run_at - created - timedelta(seconds=90.5)) < timedelta(seconds=1)
    assert abs(run_at - (datetime.now(UTC) + timedelta(seconds=90.5))) < timedelta(seconds=5)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("2030-01-01T02:00:00+02:00", "2030-01-01T00:00:00Z"),
        ("2030-06-15T12:30:45.123457Z", "2030-06-15T12:30:45.123457Z"),
        ("2001-02-03T04:05:06-07:00", "2001-02-03T11:05:06Z"),
    ],
)
async def test_run_at_is_kept_and_shown_in_utc(api: Api, given: str, shown: str) -> None:
    task = await api.enqueue(run_at=given)
    assert task["run_at"] == shown
    assert (await api.task(task["id"]))["run_at"] == shown


# --- idempotency ---------------------------------------------------------------------------


async def test_idempotency_key_in_body_returns_the_existing_task_with_200(api: Api) -> None:
    first = await api.enqueue(idempotency_key="order-42")
    again = await api.enqueue(expect=200, idempotency_key="order-42", url="http://127.0.0.1:9/other")
    assert again == first
    assert (await api.counts())["ready"] == 1


async def test_idempotency_key_header_returns_the_existing_task_with_200(api: Api) -> None:
    async def post(url: str) -> Any:
        return await api.http.post("/v1/queues/q/tasks", json={"url": url}, headers={"Idempotency-Key": "k1"})

    first, again = await post(HOOK), await post("http://127.0.0.1:9/other")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert first.json()["idempotency_key"] == "k1"
    # The header and the body field are one key space.
    assert (await api.enqueue(expect=200, idempotency_key="k1"))["id"] == first.json()["id"]
    assert (await api.counts())["ready"] == 1


async def test_idempotency_header_equal_to_the_body_key_is_accepted(api: Api) -> None:
    payload = {"url": HOOK, "idempotency_key": "same"}
    response = await api.http.post("/v1/queues/q/tasks", json=payload, headers={"Idempotency-Key": "same"})
    assert response.status_code == 201
    assert response.json()["idempotency_key"] == "same"


async def test_idempotency_header_and_body_key_that_differ_are_refused(api: Api) -> None:
    response = await api.http.post(
        "/v1/queues/q/tasks", json={"url": HOOK, "idempotency_key": "a"}, headers={"Idempotency-Key": "b"}
    )
    assert_problem(response, 422)
    assert await api.queue_names() == []


async def test_idempotency_keys_are_scoped_to_their_queue(api: Api) -> None:
    one = await api.enqueue("one", idempotency_key="k")
    two = await api.enqueue("two", idempotency_key="k")
    assert one["id"] != two["id"]


async def test_concurrent_enqueues_with_one_key_store_one_task(api: Api) -> None:
    payload = {"url": HOOK, "idempotency_key": "race"}
    responses = await asyncio.gather(*(api.http.post("/v1/queues/q/tasks", json=payload) for _ in range(12)))
    assert sorted(r.status_code for r in responses) == [200] * 11 + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert (await api.counts())["ready"] == 1


# --- batch ---------------------------------------------------------------------------------


async def test_batch_enqueue_returns_201_and_the_tasks_in_input_order(api: Api) -> None:
    batch = [{"url": f"http://127.0.0.1:9/hook/{i}", "priority": i} for i in range(5)]
    response = await api.http.post("/v1/queues/b/tasks/batch", json={"tasks": batch})
    assert response.status_code == 201
    tasks = response.json()["tasks"]
    assert [(t["url"], t["priority"], t["queue"]) for t in tasks] == [
        (b["url"], b["priority"], "b") for b in batch
    ]
    assert len(set(ids(tasks))) == 5
    for task in tasks:
        assert await api.task(task["id"]) == task
    assert (await api.counts("b"))["ready"] == 5


async def test_batch_of_1000_is_accepted(api: Api) -> None:
    response = await api.http.post("/v1/queues/b/tasks/batch", json={"tasks": [{"url": HOOK}] * 1000})
    assert response.status_code == 201
    assert len(set(ids(response.json()["tasks"]))) == 1000
    assert (await api.counts("b"))["ready"] == 1000


@pytest.mark.parametrize("size", [0, 1001])
async def test_batch_that_is_empty_or_too_big_is_refused_and_stores_nothing(api: Api, size: int) -> None:
    response = await api.http.post("/v1/queues/b/tasks/batch", json={"tasks": [{"url": HOOK}] * size})
    assert_problem(response, 422)
    assert await api.queue_names() == []


async def test_batch_with_one_bad_task_stores_none_of_them(api: Api) -> None:
    batch = [{"url": HOOK}, {"url": HOOK, "priority": "high"}, {"url": HOOK}]
    response = await api.http.post("/v1/queues/b/tasks/batch", json={"tasks": batch})
    body = assert_problem(response, 422)
    assert ["body", "tasks", "1", "priority"] in [error["location"] for error in body["errors"]]
    assert await api.queue_names() == []


async def test_batch_honours_idempotency_keys_within_and_across_calls(api: Api) -> None:
    earlier = await api.enqueue("b", idempotency_key="old")
    batch = [
        {"url": HOOK, "idempotency_key": "new"},
        {"url": HOOK, "idempotency_key": "old"},
        {"url": HOOK, "idempotency_key": "new"},
    ]
    response = await api.http.post("/v1/queues/b/tasks/batch", json={"tasks": batch})
    assert response.status_code == 201
    first, second, third = response.json()["tasks"]
    assert second == earlier
    assert third["id"] == first["id"] != earlier["id"]
    assert (await api.counts("b"))["ready"] == 2


# --- read, attempts, cancel, retry ------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", ""), ("GET", "/attempts"), ("POST", "/cancel"), ("POST", "/retry")],
)
async def test_unknown_task_is_404(api: Api, method: str, path: str) -> None:
    response = await api.http.request(method, f"/v1/tasks/task_01J00000000000000000000000{path}")
    assert_problem(response, 404, "not-found")


async def test_a_new_task_has_no_attempts(api: Api) -> None:
    task = await api.enqueue()
    response = await api.http.get(f"/v1/tasks/{task['id']}/attempts")
    assert response.status_code == 200
    assert response.json() == {"attempts": []}


async def test_cancel_then_retry(api: Api) -> None:
    task = await api.enqueue(delay=3600)
    canceled = await api.http.post(f"/v1/tasks/{task['id']}/cancel")
    assert canceled.status_code == 200
    assert canceled.json()["status"] == "canceled"
    assert (await api.task(task["id"]))["status"] == "canceled"
    assert await api.counts() == {"ready": 0, "running": 0, "succeeded": 0, "failed": 0, "canceled": 1}
    assert_problem(await api.http.post(f"/v1/tasks/{task['id']}/cancel"), 409, "conflict")

    retried = await api.http.post(f"/v1/tasks/{task['id']}/retry")
    assert retried.status_code == 200
    body = retried.json()
    assert (body["status"], body["attempts"]) == ("ready", 0)
    assert parse_time(body["run_at"]) < parse_time(task["run_at"])  # due now, not in an hour
    assert (await api.counts())["ready"] == 1
    # A ready task: retry makes it due now (the only 409 is for a running or succeeded one).
    again = await api.http.post(f"/v1/tasks/{task['id']}/retry")
    assert (again.status_code, again.json()["status"], again.json()["attempts"]) == (200, "ready", 0)
    assert parse_time(again.json()["run_at"]) >= parse_time(body["run_at"])


# --- listing -------------------------------------------------------------------------------


async def list_page(api: Api, queue: str = "q", **params: Any) -> dict[str, Any]:
    response = await api.http.get(f"/v1/queues/{queue}/tasks", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


async def walk(api: Api, **params: Any) -> list[list[str]]:
    """Every page's task ids, following next_cursor to the end."""
    pages, cursor = [], None
    while True:
        page = await list_page(api, **params, **({"cursor": cursor} if cursor else {}))
        pages.append(ids(page["tasks"]))
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "the cursor never ends"


async def test_list_is_newest_first_and_filters_by_status(api: Api) -> None:
    created = [(await api.enqueue())["id"] for _ in range(6)]
    for task_id in created[1::2]:
        assert (await api.http.post(f"/v1/tasks/{task_id}/cancel")).status_code == 200
    page = await list_page(api)
    assert ids(page["tasks"]) == created[::-1]
    assert page["next_cursor"] is None
    assert ids((await list_page(api, status="canceled"))["tasks"]) == created[1::2][::-1]
    assert ids((await list_page(api, status="ready"))["tasks"]) == created[0::2][::-1]
    assert (await list_page(api, status="failed"))["tasks"] == []


@pytest.mark.parametrize(("count", "limit"), [(7, 2), (6, 2), (5, 1), (3, 3), (3, 50)])
async def test_cursor_walk_sees_every_task_exactly_once(api: Api, count: int, limit: int) -> None:
    created = [(await api.enqueue())["id"] for _ in range(count)]
    pages = await walk(api, limit=limit)
    assert [len(page) for page in pages[:-1]] == [limit] * (len(pages) - 1)
    assert 1 <= len(pages[-1]) <= limit  # no empty trailing page
    assert [task_id for page in pages for task_id in page] == created[::-1]


async def test_cursor_walk_with_a_status_filter(api: Api) -> None:
    created = [(await api.enqueue())["id"] for _ in range(9)]
    for task_id in created[::3]:
        await api.http.post(f"/v1/tasks/{task_id}/cancel")
    ready = [task_id for task_id in created if task_id not in created[::3]]
    assert [t for page in await walk(api, status="ready", limit=2) for t in page] == ready[::-1]
    assert [t for page in await walk(api, status="canceled", limit=2) for t in page] == created[::3][::-1]


async def test_other_queues_do_not_leak_into_a_listing(api: Api) -> None:
    mine = (await api.enqueue("mine"))["id"]
    await api.enqueue("theirs")
    assert ids((await list_page(api, "mine"))["tasks"]) == [mine]


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!",
        "x",
        base64.urlsafe_b64encode(b"s:abc").decode(),
        base64.urlsafe_b64encode(b"t:12").decode(),
        base64.urlsafe_b64encode(b"s:-1").decode(),
        base64.urlsafe_b64encode(b"s:9999999999999999999").decode(),  # beyond a 64-bit seq
    ],
)
async def test_invalid_cursor_is_400(api: Api, cursor: str) -> None:
    await api.enqueue()
    response = await api.http.get("/v1/queues/q/tasks", params={"cursor": cursor})
    assert_problem(response, 400, "bad-cursor")


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"limit": "ten"}, {"status": "done"}])
async def test_invalid_list_parameters_are_422(api: Api, params: dict[str, Any]) -> None:
    await api.enqueue()
    assert_problem(await api.http.get("/v1/queues/q/tasks", params=params), 422, "validation")


async def test_listing_an_unknown_queue_is_404(api: Api) -> None:
    assert_problem(await api.http.get("/v1/queues/nope/tasks"), 404, "not-found")


# --- listing across queues (GET /v1/tasks) ---------------------------------------------------


async def list_all(api: Api, **params: Any) -> dict[str, Any]:
    response = await api.http.get("/v1/tasks", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


async def test_list_all_spans_queues_newest_first_with_filters(api: Api) -> None:
    created = [(queue, (await api.enqueue(queue))["id"]) for queue in ("a", "b", "a", "c", "b")]
    canceled = created[1][1]
    assert (await api.http.post(f"/v1/tasks/{canceled}/cancel")).status_code == 200
    assert ids((await list_all(api))["tasks"]) == [task_id for _, task_id in reversed(created)]
    assert ids((await list_all(api, status="canceled"))["tasks"]) == [canceled]
    assert ids((await list_all(api, queue="a"))["tasks"]) == [created[2][1], created[0][1]]
    assert ids((await list_all(api, queue="b", status="ready"))["tasks"]) == [created[4][1]]
    first = await list_all(api, limit=2)
    rest = await list_all(api, limit=10, cursor=first["next_cursor"])
    assert ids(first["tasks"]) + ids(rest["tasks"]) == [task_id for _, task_id in reversed(created)]
    assert rest["next_cursor"] is None


@pytest.mark.parametrize(
    "params",
    [{"queue": "bad name"}, {"queue": "a\n"}, {"queue": "x" * 129}, {"status": "done"}, {"limit": 0}],
)
async def test_list_all_refuses_bad_filters(api: Api, params: dict[str, Any]) -> None:
    assert_problem(await api.http.get("/v1/tasks", params=params), 422, "validation")


async def test_list_all_of_an_unknown_queue_is_404(api: Api) -> None:
    assert_problem(await api.http.get("/v1/tasks", params={"queue": "nope"}), 404, "not-found")


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("fields", "body", "body_base64"),
    [
        ({"body": {"a": [1, 2]}}, {"a": [1, 2]}, None),
        ({"body": "plain", "headers": {"content-type": "text/plain"}}, "plain", None),
        ({"body_base64": "AP8="}, None, "AP8="),  # not text
        ({"body_base64": base64.b64encode(b"utf-8 text").decode()}, "utf-8 text", None),  # reads as text
        ({"body_base64": base64.b64encode(b'{"a": 1}').decode(), "headers": JSON}, {"a": 1}, None),
        # JSON no answer could carry again unchanged: shown as the text it is.
        ({"body_base64": "eyJhIjoxLjAsImEiOjJ9", "headers": JSON}, '{"a":1.0,"a":2}', None),  # base64 of it
        ({"body_base64": base64.b64encode(b'{"a":NaN}').decode(), "headers": JSON}, '{"a":NaN}', None),
        ({"body_base64": base64.b64encode(b"[1e400]").decode(), "headers": JSON}, "[1e400]", None),
        ({"body_base64": base64.b64encode(b'["\\ud800"]').decode(), "headers": JSON}, '["\\ud800"]', None),
        ({}, None, None),
    ],
    ids=["json", "text", "binary", "bytes that are text", "spaced json", "repeated key", "NaN",
         "too large", "lone surrogate", "none"],
)  # fmt: skip
async def test_a_task_shows_its_body_once(
    api: Api, fields: dict[str, Any], body: Any, body_base64: str | None
) -> None:
    """body when it reads as JSON or text, else body_base64: never both (a 200 KB body is
    not answered twice), and never an answer that is not JSON (no 500)."""
    task = await api.enqueue(**fields)
    listed = (await api.http.get("/v1/tasks", params={"queue": task["queue"]})).json()["tasks"]
    for shown in (task, await api.task(task["id"]), *listed):
        assert (shown["body"], shown["body_base64"]) == (body, body_base64)
