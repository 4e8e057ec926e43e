"""Bad requests: every one is answered with an RFC 9457 problem, and none stores anything.

"Nothing stored" is checked through GET /v1/queues: a refused enqueue must not even
create its queue.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import HOOK, Api, assert_problem

TASKS = "/v1/queues/q/tasks"
OMIT = object()  # a field left out of the request

BAD_TASKS: dict[str, dict[str, Any]] = {
    "missing url": {"url": OMIT},
    "url null": {"url": None},
    "url not a URL": {"url": "not a url"},
    "url without host": {"url": "http://"},
    "url with port 0": {"url": "http://127.0.0.1:0/hook"},
    "url with port too big": {"url": "http://127.0.0.1:99999/hook"},
    "url broken IPv6": {"url": "http://[::1/hook"},
    "url with a space": {"url": "http://127.0.0.1:9/a b"},
    "url too long": {"url": HOOK + "/" + "a" * 4096},
    "ftp url": {"url": "ftp://127.0.0.1/hook"},
    "file url": {"url": "file:///etc/passwd"},
    "javascript url": {"url": "javascript:alert(1)"},
    "url with user:pass@": {"url": "http://user:pass@127.0.0.1:9/hook"},
    "url with user@": {"url": "http://user@127.0.0.1:9/hook"},
    "unknown method": {"method": "TRACE"},
    "priority high": {"priority": "high"},
    "priority out of range": {"priority": 10**7},
    "headers a string": {"headers": "x-a: 1"},
    "headers a list": {"headers": [["x-a", "1"]]},
    "header value a number": {"headers": {"x-a": 1}},
    "header value null": {"headers": {"x-a": None}},
    "header value with CRLF": {"headers": {"x-a": "1\r\nx-injected: 2"}},
    "header value with LF": {"headers": {"x-a": "1\nx-injected: 2"}},
    "header value with NUL": {"headers": {"x-a": "1\x002"}},
    "header value with a vertical tab": {"headers": {"x-a": "1\x0b2"}},
    "header value with DEL": {"headers": {"x-a": "1\x7f"}},
    "header value beyond latin-1": {"headers": {"x-a": "5 \u20ac"}},
    "header webhook-id": {"headers": {"Webhook-Id": "spoofed"}},
    "header webhook-signature": {"headers": {"webhook-signature": "v1,forged"}},
    "url the deliverer cannot read": {"url": "http://127.0.0.1\\.127.0.0.2/hook"},
    "header name with a space": {"headers": {"x a": "1"}},
    "header name with a colon": {"headers": {"x:a": "1"}},
    "header name empty": {"headers": {"": "1"}},
    "header name not ASCII": {"headers": {"x-\u00e9": "1"}},
    "header given twice": {"headers": {"X-A": "1", "x-a": "2"}},
    "too many headers": {"headers": {f"x-{i}": "1" for i in range(65)}},
    "unknown field": {"callback": HOOK},
    "unknown field in camelCase": {"maxAttempts": 3},
    "body and body_base64": {"body": {"a": 1}, "body_base64": "AA=="},
    "body null and body_base64": {"body": None, "body_base64": "AA=="},
    "body_base64 not base64": {"body_base64": "not base64!"},
    "body_base64 bad padding": {"body_base64": "abc"},
    "body_base64 a number": {"body_base64": 12},
    "delay and run_at": {"delay": 5, "run_at": "2030-01-01T00:00:00Z"},
    "negative delay": {"delay": -1},
    "delay a word": {"delay": "soon"},
    "run_at without offset": {"run_at": "2030-01-01T00:00:00"},
    "run_at not a time": {"run_at": "tomorrow"},
    "max_attempts 0": {"max_attempts": 0},
    "max_attempts negative": {"max_attempts": -3},
    "timeout 0": {"timeout": 0},
    "key empty": {"key": ""},
    "key too long": {"key": "k" * 256},
    "key with NUL": {"key": "a\x00b"},
    "tenant with NUL": {"tenant": "a\x00b"},
    "idempotency_key with NUL": {"idempotency_key": "a\x00b"},
    "tenant a number": {"tenant": 7},
}


def task_json(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in {"url": HOOK, **fields}.items() if value is not OMIT}


@pytest.mark.parametrize("fields", BAD_TASKS.values(), ids=BAD_TASKS.keys())
async def test_bad_task_is_422_and_stores_nothing(api: Api, fields: dict[str, Any]) -> None:
    body = assert_problem(await api.http.post(TASKS, json=task_json(fields)), 422, "validation")
    assert body["errors"], "a validation problem lists its errors"
    assert all(isinstance(error["location"], list) and error["message"] for error in body["errors"])
    assert await api.queue_names() == []


IN_BATCH = ["missing url", "ftp url", "priority high", "header value with CRLF", "body and body_base64"]


@pytest.mark.parametrize("name", IN_BATCH)
async def test_bad_task_in_a_batch_stores_nothing(api: Api, name: str) -> None:
    batch = [{"url": HOOK}, task_json(BAD_TASKS[name])]
    assert_problem(await api.http.post(TASKS + "/batch", json={"tasks": batch}), 422, "validation")
    assert await api.queue_names() == []


RAW_JSON = {
    "truncated": (b'{"url": "http://127.0.0.1:9/hook"', 400),
    "trailing comma": (b'{"url": "http://127.0.0.1:9/hook",}', 400),
    "not JSON at all": (b"url=http://127.0.0.1:9/hook", 400),
    "empty": (b"", 400),
    "a list": (b'[{"url": "http://127.0.0.1:9/hook"}]', 422),
    "a string": (b'"http://127.0.0.1:9/hook"', 422),
    # Python's JSON parser accepts these literals; JSON (RFC 8259) does not.
    "NaN in body": (b'{"url": "http://127.0.0.1:9/hook", "body": {"x": NaN}}', 422),
    "Infinity in body": (b'{"url": "http://127.0.0.1:9/hook", "body": [Infinity]}', 422),
    "NaN delay": (b'{"url": "http://127.0.0.1:9/hook", "delay": NaN}', 422),
    # A lone UTF-16 surrogate cannot be stored or sent as UTF-8: the single-task route's
    # JSON parser (pydantic-core) refuses it as invalid JSON.
    "lone surrogate in body": (b'{"url": "http://127.0.0.1:9/hook", "body": "\\ud800"}', 400),
    "lone surrogate in a body key": (b'{"url": "http://127.0.0.1:9/hook", "body": {"\\udfff": 1}}', 400),
    "lone surrogate in a header": (b'{"url": "http://127.0.0.1:9/hook", "headers": {"x-a": "\\ud800"}}', 400),
    "lone surrogate in key": (b'{"url": "http://127.0.0.1:9/hook", "key": "\\ud800"}', 400),
}

# The batch route parses with Python's json module, which accepts lone surrogates:
# the models refuse them (422).
BATCH_SURROGATES = {
    "in body": b'{"tasks": [{"url": "http://127.0.0.1:9/hook", "body": "\\ud800"}]}',
    "in a header": b'{"tasks": [{"url": "http://127.0.0.1:9/hook", "headers": {"x-a": "\\udfff"}}]}',
}


@pytest.mark.parametrize("content", BATCH_SURROGATES.values(), ids=BATCH_SURROGATES.keys())
async def test_batch_with_lone_surrogates_is_422_and_stores_nothing(api: Api, content: bytes) -> None:
    response = await api.http.post(
        TASKS + "/batch", content=content, headers={"content-type": "application/json"}
    )
    assert_problem(response, 422, "validation")
    assert await api.queue_names() == []


@pytest.mark.parametrize(("content", "status"), RAW_JSON.values(), ids=RAW_JSON.keys())
async def test_bad_json_is_refused_and_stores_nothing(api: Api, content: bytes, status: int) -> None:
    response = await api.http.post(TASKS, content=content, headers={"content-type": "application/json"})
    assert_problem(response, status, "malformed-json" if status == 400 else "validation")
    assert await api.queue_names() == []


NOT_JSON = ["text/plain", "application/x-www-form-urlencoded", "application/xml", "multipart/form-data"]


@pytest.mark.parametrize("content_type", NOT_JSON)
async def test_non_json_content_type_is_415_and_stores_nothing(api: Api, content_type: str) -> None:
    content = b'{"url": "http://127.0.0.1:9/hook"}'
    response = await api.http.post(TASKS, content=content, headers={"content-type": content_type})
    assert content_type in assert_problem(response, 415, "unsupported-media-type")["detail"]
    assert await api.queue_names() == []


async def test_a_body_without_content_type_is_415_and_stores_nothing(api: Api) -> None:
    content = b'{"url": "http://127.0.0.1:9/hook"}'
    response = await api.http.post(TASKS, content=content)
    assert "no content-type" in assert_problem(response, 415, "unsupported-media-type")["detail"]
    assert await api.queue_names() == []


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/merge-patch+json"])
async def test_json_content_types_with_parameters_or_suffix_are_accepted(api: Api, content_type: str) -> None:
    content = b'{"url": "http://127.0.0.1:9/hook"}'
    response = await api.http.post(TASKS, content=content, headers={"content-type": content_type})
    assert response.status_code == 201, response.text


async def test_empty_idempotency_key_header_is_refused(api: Api) -> None:
    response = await api.http.post(TASKS, json={"url": HOOK}, headers={"Idempotency-Key": ""})
    assert_problem(response, 422, "validation")
    assert await api.queue_names() == []


@pytest.mark.parametrize(
    "run_at",
    [
        "0001-01-01T00:00:00+01:00",  # year 0 in UTC
        "9999-12-31T23:59:59-01:00",  # year 10000 in UTC
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
        "1969-12-31T23:59:59Z",
        "3000-01-01T00:00:00Z",
    ],
)
async def test_run_at_outside_the_representable_range_is_422(api: Api, run_at: str) -> None:
    assert_problem(await api.http.post(TASKS, json={"url": HOOK, "run_at": run_at}), 422, "validation")
    assert await api.queue_names() == []
    # A bad row would make the queue's listing fail forever: check it still answers.
    await api.enqueue()
    assert (await api.http.get(TASKS)).status_code == 200


@pytest.mark.parametrize(
    "run_at",
    [
        "2500-06-15T12:30:45.123457Z",  # far from 1970: microseconds must not drift
        "1970-01-01T00:00:00Z",
        "2999-12-31T23:59:59.999999Z",
    ],
)
async def test_run_at_round_trips_exactly_at_the_edges(api: Api, run_at: str) -> None:
    task = await api.enqueue(run_at=run_at)
    assert task["run_at"] == run_at
    assert (await api.task(task["id"]))["run_at"] == run_at
    assert (await api.http.get(TASKS)).status_code == 200


# --- paths ---------------------------------------------------------------------------------

QUEUE_ROUTES = [
    ("POST", "/v1/queues/{}/tasks", {"url": HOOK}),
    ("POST", "/v1/queues/{}/tasks/batch", {"tasks": [{"url": HOOK}]}),
    ("GET", "/v1/queues/{}/tasks", None),
    ("GET", "/v1/queues/{}", None),
    ("PUT", "/v1/queues/{}", {}),
    ("PATCH", "/v1/queues/{}", {"paused": True}),
    ("DELETE", "/v1/queues/{}", None),
    ("POST", "/v1/queues/{}/pause", None),
    ("POST", "/v1/queues/{}/resume", None),
    ("POST", "/v1/queues/{}/purge", None),
]
ROUTE_IDS = [f"{method} {path}" for method, path, _ in QUEUE_ROUTES]
BAD_NAMES = ["bad name", ".hidden", "-dash", "_under", "x" * 129, "caf\u00e9", "semi;colon", "new%0Aline"]


@pytest.mark.parametrize(("method", "path", "payload"), QUEUE_ROUTES, ids=ROUTE_IDS)
async def test_invalid_queue_names_are_422_on_every_queue_route(
    api: Api, method: str, path: str, payload: Any
) -> None:
    for name in BAD_NAMES:
        response = await api.http.request(method, path.format(name), json=payload)
        body = assert_problem(response, 422, "validation")
        assert ["path", "queue"] in [error["location"] for error in body["errors"]], name
    assert await api.queue_names() == []


async def test_longest_valid_queue_name_is_accepted(api: Api) -> None:
    name = "Q" + "a.b_c-9" * 18 + "x"  # 128 characters
    assert len(name) == 128
    assert (await api.enqueue(name))["queue"] == name
    assert await api.queue_names() == [name]


UNKNOWN_IDS = ["nope", "task_01J00000000000000000000000", "a%00b", "%E2%98%83", "task_%20"]


@pytest.mark.parametrize("task_id", UNKNOWN_IDS)
async def test_any_unknown_task_id_is_404(api: Api, task_id: str) -> None:
    await api.enqueue()
    for method, suffix in [("GET", ""), ("GET", "/attempts"), ("POST", "/cancel"), ("POST", "/retry")]:
        assert_problem(await api.http.request(method, f"/v1/tasks/{task_id}{suffix}"), 404, "not-found")
    assert (await api.counts())["ready"] == 1


# --- routing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nope"),  # (GET / leads to the dashboard)
        ("GET", "/v1"),
        ("GET", "/v2/queues"),
        ("GET", "/v1/task/x"),
        ("POST", "/v1/queues/q/tasks/x/y"),
    ],
)
async def test_unknown_route_is_a_404_problem(api: Api, method: str, path: str) -> None:
    assert_problem(await api.http.request(method, path), 404, "not-found")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/tasks/task_x/attempts", {"GET"}),
        ("GET", "/v1/tasks/task_x/cancel", {"POST"}),
        ("PUT", "/v1/queues/q/tasks/batch", {"POST"}),
        ("POST", "/v1/queues", {"GET"}),
        ("POST", "/health/live", {"GET"}),
        ("GET", "/v1/queues/q/purge", {"POST"}),
    ],
)
async def test_wrong_method_is_a_405_problem_with_allow(
    api: Api, method: str, path: str, allowed: set[str]
) -> None:
    response = await api.http.request(method, path)
    assert_problem(response, 405, "method-not-allowed")
    assert {m.strip() for m in response.headers["allow"].split(",")} == allowed
    assert await api.queue_names() == []


async def test_conflict_and_not_found_problems_name_the_resource(api: Api) -> None:
    task = await api.enqueue()
    await api.http.post(f"/v1/tasks/{task['id']}/cancel")
    conflict = assert_problem(await api.http.post(f"/v1/tasks/{task['id']}/cancel"), 409, "conflict")
    assert task["id"] in conflict["detail"] and "canceled" in conflict["detail"]
    missing = assert_problem(await api.http.get("/v1/queues/ghost"), 404, "not-found")
    assert "ghost" in missing["detail"]
