"""Event routes of API v1 (docs/webhooks.md), in-process (the real service and app), on SQLite and
on PostgreSQL: publish (fan-out to the matching endpoints, idempotency, payload encoding,
scheduling), read with each delivery's status, list with filters and cursors, and refusals that
store nothing.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.conftest import HOOK, Api, assert_problem
from tests.support.bodies import stored_body
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings

SMALL_LIMIT = 64  # WORKLY_MAX_BODY_BYTES of the small_api fixture
JSON = {"content-type": "application/json"}
EVENT_FIELDS = {
    "id",
    "type",
    "tenant",
    "key",
    "idempotency_key",
    "payload",
    "payload_base64",
    "run_at",
    "created_at",
    "deliveries",
    "callback_url",
    "failure_callback_url",
    "labels",
}


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture
async def small_api(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    monkeypatch.setenv("WORKLY_MAX_BODY_BYTES", str(SMALL_LIMIT))
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    assert settings.max_body_bytes == SMALL_LIMIT
    async with in_process(settings) as (_, http):
        yield Api(http)


async def endpoint(api: Api, **fields: Any) -> str:
    response = await api.http.post("/v1/endpoints", json={"url": HOOK, **fields})
    assert response.status_code == 201, response.text
    endpoint_id: str = response.json()["id"]
    return endpoint_id


async def publish(
    api: Api,
    event_type: str = "invoice.paid",
    expect: int = 201,
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    body = {"type": event_type, **fields}
    if "payload" not in body and "payload_base64" not in body:
        body["payload"] = {"invoice": 42}
    response = await api.http.post("/v1/events", json=body, headers=headers)
    assert response.status_code == expect, response.text
    event: dict[str, Any] = response.json()
    return event


async def event_of(api: Api, event_id: str) -> dict[str, Any]:
    response = await api.http.get(f"/v1/events/{event_id}")
    assert response.status_code == 200, response.text
    event: dict[str, Any] = response.json()
    return event


async def listing(api: Api, **params: Any) -> dict[str, Any]:
    response = await api.http.get("/v1/events", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    assert set(page) == {"events", "next_cursor"}
    return page


async def listed_ids(api: Api, **params: Any) -> list[str]:
    return [event["id"] for event in (await listing(api, **params))["events"]]


async def all_task_ids(api: Api) -> list[str]:
    response = await api.http.get("/v1/tasks")
    assert response.status_code == 200, response.text
    return [task["id"] for task in response.json()["tasks"]]


def receivers(event: dict[str, Any]) -> list[str]:
    return [delivery["endpoint_id"] for delivery in event["deliveries"]]


def parse_time(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


# --- publish ---------------------------------------------------------------------------------


async def test_an_event_no_endpoint_takes_is_stored_with_no_deliveries(api: Api) -> None:
    before = datetime.now(UTC)
    event = await publish(api, payload={"invoice": 42, "lines": [1, 2]})
    assert set(event) == EVENT_FIELDS
    assert event["id"].startswith("evt_") and len(event["id"]) > len("evt_")
    assert (event["type"], event["tenant"], event["key"], event["idempotency_key"]) == (
        "invoice.paid",
        None,
        None,
        None,
    )
    assert event["deliveries"] == []
    assert event["payload"] == {"invoice": 42, "lines": [1, 2]}
    assert base64.b64decode(event["payload_base64"]) == b'{"invoice":42,"lines":[1,2]}'
    created = parse_time(event["created_at"])
    assert before - timedelta(seconds=1) <= created <= datetime.now(UTC) + timedelta(seconds=1)
    assert event["run_at"] == event["created_at"]
    assert await event_of(api, event["id"]) == event
    assert await listed_ids(api) == [event["id"]]
    assert await all_task_ids(api) == []


async def test_publish_makes_one_delivery_task_per_matching_endpoint(api: Api) -> None:
    every = await endpoint(api)
    exact = await endpoint(api, event_types=["invoice.paid"])
    prefix = await endpoint(api, event_types=["invoice.*"])
    users = await endpoint(api, event_types=["user.*", "invoice.created"])
    both = await endpoint(api, event_types=["invoice.paid", "invoice.*"])
    acme = await endpoint(api, tenant="acme")
    acme_invoices = await endpoint(api, tenant="acme", event_types=["invoice.*"])
    globex = await endpoint(api, tenant="globex")

    paid = await publish(api, "invoice.paid")
    assert sorted(receivers(paid)) == sorted([every, exact, prefix, both])
    assert sorted(receivers(await publish(api, "invoice.line.added"))) == sorted([every, prefix, both])
    assert receivers(await publish(api, "invoice")) == [every]
    assert receivers(await publish(api, "invoices.paid")) == [every]
    assert sorted(receivers(await publish(api, "user.created"))) == sorted([every, users])
    assert receivers(await publish(api, "invoice.created", tenant="acme")) == [acme, acme_invoices]
    assert receivers(await publish(api, "user.created", tenant="acme")) == [acme]
    assert receivers(await publish(api, "invoice.paid", tenant="globex")) == [globex]
    assert receivers(await publish(api, "invoice.paid", tenant="initech")) == []

    task_ids = [delivery["task_id"] for delivery in paid["deliveries"]]
    assert len(set(task_ids)) == len(task_ids)
    for delivery in paid["deliveries"]:
        assert set(delivery) >= {"endpoint_id", "task_id", "status", "attempts"}
        assert delivery["task_id"].startswith("task_")
        assert (delivery["status"], delivery["attempts"]) == ("ready", 0)
    assert await event_of(api, paid["id"]) == paid


async def test_a_delivery_is_a_task_of_the_endpoint_with_the_event_and_endpoint_ids(api: Api) -> None:
    endpoint_id = await endpoint(api, headers={"X-Customer": "42"}, max_attempts=4, timeout=5)
    event = await publish(api, payload={"invoice": 42, "name": "Zo\u00eb"}, key="customer-1")
    [delivery] = event["deliveries"]
    task = await api.task(delivery["task_id"])
    assert (task["event_id"], task["endpoint_id"], task["queue"]) == (event["id"], endpoint_id, endpoint_id)
    assert (task["url"], task["method"], task["status"], task["attempts"]) == (HOOK, "POST", "ready", 0)
    assert task["headers"] == {"X-Customer": "42", "content-type": "application/json"}
    assert stored_body(task) == '{"invoice":42,"name":"Zo\u00eb"}'.encode()
    assert task["body"] == {"invoice": 42, "name": "Zo\u00eb"}
    assert (task["key"], task["max_attempts"], task["timeout"]) == ("customer-1", 4, 5.0)
    assert task["run_at"] == event["run_at"]

    plain = await api.enqueue("plain")
    assert (plain["event_id"], plain["endpoint_id"]) == (None, None)


async def test_an_endpoints_own_content_type_is_kept_and_not_duplicated(api: Api) -> None:
    headers = {"Content-Type": "application/cloudevents+json"}
    endpoint_id = await endpoint(api, headers=headers)
    json_event = await publish(api, payload={"a": 1})
    raw_event = await publish(api, payload_base64=base64.b64encode(b"\x00\x01").decode())
    for event in (json_event, raw_event):
        task = await api.task(event["deliveries"][0]["task_id"])
        assert task["endpoint_id"] == endpoint_id
        assert task["headers"] == headers


@pytest.mark.parametrize(
    ("payload", "sent"),
    [
        (None, b"null"),
        (False, b"false"),
        (0, b"0"),
        ("hello", b'"hello"'),
        ([], b"[]"),
        ({"x": [True, None, 1.5]}, b'{"x":[true,null,1.5]}'),
    ],
)
async def test_any_json_payload_is_delivered_as_compact_json(api: Api, payload: Any, sent: bytes) -> None:
    await endpoint(api)
    event = await publish(api, payload=payload)
    assert event["payload"] == payload
    assert base64.b64decode(event["payload_base64"]) == sent
    task = await api.task(event["deliveries"][0]["task_id"])
    assert stored_body(task) == sent
    assert task["headers"] == {"content-type": "application/json"}


async def test_payload_base64_is_delivered_as_the_raw_bytes(api: Api) -> None:
    await endpoint(api)
    raw = bytes(range(256))
    event = await publish(api, payload_base64=base64.b64encode(raw).decode())
    assert event["payload"] is None
    assert base64.b64decode(event["payload_base64"]) == raw
    task = await api.task(event["deliveries"][0]["task_id"])
    assert stored_body(task) == raw
    assert task["headers"] == {"content-type": "application/octet-stream"}
    assert await event_of(api, event["id"]) == event


async def test_delay_puts_the_event_and_its_deliveries_later(api: Api) -> None:
    await endpoint(api)
    event = await publish(api, delay=90.5)
    run_at, created = parse_time(event["run_at"]), parse_time(event["created_at"])
    assert abs(run_at - created - timedelta(seconds=90.5)) < timedelta(seconds=1)
    task = await api.task(event["deliveries"][0]["task_id"])
    assert task["run_at"] == event["run_at"]


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("2030-01-01T02:00:00+02:00", "2030-01-01T00:00:00Z"),
        ("2030-06-15T12:30:00Z", "2030-06-15T12:30:00Z"),
        ("2029-12-31T19:00:00-05:00", "2030-01-01T00:00:00Z"),
    ],
)
async def test_run_at_is_kept_in_utc(api: Api, given: str, shown: str) -> None:
    await endpoint(api)
    event = await publish(api, run_at=given)
    assert event["run_at"] == shown
    assert (await api.task(event["deliveries"][0]["task_id"]))["run_at"] == shown
    assert (await event_of(api, event["id"]))["run_at"] == shown


# --- idempotency -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["header", "field", "header then field", "field then header", "both"])
async def test_a_repeated_idempotency_key_answers_200_with_the_original(api: Api, how: str) -> None:
    endpoint_id = await endpoint(api)

    def keyed(use: str) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if use in ("header", "both"):
            fields["headers"] = {"Idempotency-Key": "invoice-1042-paid"}
        if use in ("field", "both"):
            fields["idempotency_key"] = "invoice-1042-paid"
        return fields

    first_way, _, second_way = how.partition(" then ")
    first = await publish(api, **keyed(first_way))
    assert first["idempotency_key"] == "invoice-1042-paid"
    again = await publish(api, expect=200, payload={"other": True}, **keyed(second_way or first_way))
    assert again == first
    assert await listed_ids(api) == [first["id"]]
    response = await api.http.get(f"/v1/endpoints/{endpoint_id}/tasks")
    assert [t["id"] for t in response.json()["tasks"]] == [first["deliveries"][0]["task_id"]]


async def test_idempotency_keys_are_per_tenant(api: Api) -> None:
    key = {"Idempotency-Key": "k1"}
    untenanted = await publish(api, headers=key)
    acme = await publish(api, headers=key, tenant="acme")
    globex = await publish(api, headers=key, tenant="globex")
    assert len({untenanted["id"], acme["id"], globex["id"]}) == 3
    assert (await publish(api, expect=200, headers=key, tenant="acme"))["id"] == acme["id"]
    assert (await publish(api, expect=200, headers=key))["id"] == untenanted["id"]


async def test_the_header_and_the_field_differing_is_422_and_stores_nothing(api: Api) -> None:
    endpoint_id = await endpoint(api)
    response = await api.http.post(
        "/v1/events",
        json={"type": "invoice.paid", "payload": {}, "idempotency_key": "a"},
        headers={"Idempotency-Key": "b"},
    )
    assert_problem(response, 422, "validation")
    assert await listed_ids(api) == []
    assert await all_task_ids(api) == []
    assert (await api.http.get(f"/v1/endpoints/{endpoint_id}/tasks")).json()["tasks"] == []


@pytest.mark.parametrize("header", ["k" * 256, "a\x01b", "tab\there"])
async def test_a_bad_idempotency_key_header_is_422(api: Api, header: str) -> None:
    await endpoint(api)
    response = await api.http.post(
        "/v1/events", json={"type": "invoice.paid", "payload": {}}, headers={"Idempotency-Key": header}
    )
    assert_problem(response, 422, "validation")
    assert await listed_ids(api) == []
    assert await all_task_ids(api) == []


# --- read ------------------------------------------------------------------------------------


async def test_an_event_shows_each_deliverys_task_status(api: Api) -> None:
    first, second = await endpoint(api), await endpoint(api)
    event = await publish(api)
    canceled = next(d["task_id"] for d in event["deliveries"] if d["endpoint_id"] == first)
    assert (await api.http.post(f"/v1/tasks/{canceled}/cancel")).status_code == 200
    shown = await event_of(api, event["id"])
    statuses = {d["endpoint_id"]: d["status"] for d in shown["deliveries"]}
    assert statuses == {first: "canceled", second: "ready"}
    assert [d["task_id"] for d in shown["deliveries"]] == [d["task_id"] for d in event["deliveries"]]
    assert (await listing(api))["events"] == [shown]


@pytest.mark.parametrize("unknown", ["evt_nope", "nope", "evt_" + "0" * 26])
async def test_an_unknown_event_is_404(api: Api, unknown: str) -> None:
    await publish(api)
    problem = assert_problem(await api.http.get(f"/v1/events/{unknown}"), 404, "not-found")
    assert unknown in problem["detail"]


# --- list ------------------------------------------------------------------------------------


async def test_list_is_newest_first_with_type_and_tenant_filters(api: Api) -> None:
    assert await listing(api) == {"events": [], "next_cursor": None}
    published = [
        await publish(api, "invoice.paid"),
        await publish(api, "invoice.paid", tenant="acme"),
        await publish(api, "user.created", tenant="acme"),
        await publish(api, "invoice.paid.late"),
        await publish(api, "user.created"),
    ]
    ids = [event["id"] for event in published]
    assert await listed_ids(api) == ids[::-1]
    assert await listed_ids(api, type="invoice.paid") == [ids[1], ids[0]]  # exact, not a prefix
    assert await listed_ids(api, type="user.created") == [ids[4], ids[2]]
    assert await listed_ids(api, tenant="acme") == [ids[2], ids[1]]
    assert await listed_ids(api, tenant="globex") == []
    assert await listed_ids(api, type="invoice.paid", tenant="acme") == [ids[1]]
    assert (await listing(api))["events"][0] == await event_of(api, ids[4])


@pytest.mark.parametrize(("count", "limit"), [(5, 2), (4, 2), (3, 1), (3, 3)])
async def test_cursor_walk_sees_every_event_exactly_once(api: Api, count: int, limit: int) -> None:
    created = [(await publish(api))["id"] for _ in range(count)]
    await publish(api, "other.type")
    pages, cursor = [], None
    while True:
        params: dict[str, Any] = {"limit": limit, "type": "invoice.paid"}
        page = await listing(api, **params, **({"cursor": cursor} if cursor else {}))
        pages.append([event["id"] for event in page["events"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 100
    assert [len(page) for page in pages[:-1]] == [limit] * (len(pages) - 1)
    assert 1 <= len(pages[-1]) <= limit
    assert [event_id for page in pages for event_id in page] == created[::-1]


async def test_the_default_page_holds_50(api: Api) -> None:
    created = [(await publish(api))["id"] for _ in range(51)]
    first = await listing(api)
    assert [e["id"] for e in first["events"]] == created[:0:-1]
    assert await listed_ids(api, cursor=first["next_cursor"]) == created[:1]
    assert len(await listed_ids(api, limit=500)) == 51


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 501},
        {"limit": "ten"},
        {"tenant": ""},
        {"tenant": "a\x00"},
        {"type": "t" * 129},
        {"type": "a\x00b"},  # PostgreSQL text cannot hold NUL: it must not reach the query
        {"type": "invoice.paid\n"},
        {"type": "invoice.*"},
        {"type": ""},
    ],
)
async def test_bad_list_parameters_are_422(api: Api, params: dict[str, Any]) -> None:
    await publish(api)
    assert_problem(await api.http.get("/v1/events", params=params), 422, "validation")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!",
        base64.urlsafe_b64encode(b"s:abc").decode(),
        base64.urlsafe_b64encode(b"t:12").decode(),
        base64.urlsafe_b64encode(b"s:9999999999999999999").decode(),
    ],
)
async def test_a_cursor_not_handed_out_is_400(api: Api, cursor: str) -> None:
    await publish(api)
    assert_problem(await api.http.get("/v1/events", params={"cursor": cursor}), 400, "bad-cursor")


# --- bad input stores nothing ----------------------------------------------------------------

B64 = base64.b64encode(b"raw").decode()
BAD_EVENTS: dict[str, Any] = {
    "unknown field": {"type": "invoice.paid", "payload": {}, "data": {}},
    "id given": {"type": "invoice.paid", "payload": {}, "id": "evt_mine"},
    "payload and payload_base64": {"type": "invoice.paid", "payload": {}, "payload_base64": B64},
    "null payload and payload_base64": {"type": "invoice.paid", "payload": None, "payload_base64": B64},
    "neither payload nor payload_base64": {"type": "invoice.paid"},
    "payload_base64 not base64": {"type": "invoice.paid", "payload_base64": "not base64!"},
    "payload_base64 not a string": {"type": "invoice.paid", "payload_base64": 12},
    "no type": {"payload": {}},
    "type null": {"type": None, "payload": {}},
    "type empty": {"type": "", "payload": {}},
    "type a pattern": {"type": "invoice.*", "payload": {}},
    "type *": {"type": "*", "payload": {}},
    "type with a space": {"type": "invoice paid", "payload": {}},
    "type with a trailing dot": {"type": "invoice.", "payload": {}},
    "type with a leading dot": {"type": ".invoice", "payload": {}},
    "type with two dots": {"type": "invoice..paid", "payload": {}},
    "type with a newline": {"type": "invoice.paid\n", "payload": {}},
    "type too long": {"type": "t" * 129, "payload": {}},
    "type not a string": {"type": 7, "payload": {}},
    "run_at without an offset": {"type": "invoice.paid", "payload": {}, "run_at": "2030-01-01T00:00:00"},
    "run_at not a time": {"type": "invoice.paid", "payload": {}, "run_at": "tomorrow"},
    "run_at in the year 3000": {"type": "invoice.paid", "payload": {}, "run_at": "3000-01-01T00:00:00Z"},
    "run_at past 2999 in UTC": {"type": "invoice.paid", "payload": {}, "run_at": "2999-12-31T23:00:00-05:00"},
    "run_at before 1970": {"type": "invoice.paid", "payload": {}, "run_at": "1969-12-31T23:59:59Z"},
    "run_at at the end of time": {
        "type": "invoice.paid",
        "payload": {},
        "run_at": "9999-12-31T23:59:59-23:59",
    },
    "delay and run_at": {"type": "invoice.paid", "payload": {}, "delay": 5, "run_at": "2030-01-01T00:00:00Z"},
    "delay negative": {"type": "invoice.paid", "payload": {}, "delay": -1},
    "delay over a year": {"type": "invoice.paid", "payload": {}, "delay": 367 * 86400},
    "tenant empty": {"type": "invoice.paid", "payload": {}, "tenant": ""},
    "tenant with a control character": {"type": "invoice.paid", "payload": {}, "tenant": "a\x1fb"},
    "key too long": {"type": "invoice.paid", "payload": {}, "key": "k" * 256},
    "idempotency_key empty": {"type": "invoice.paid", "payload": {}, "idempotency_key": ""},
    "lone surrogate in the payload": {"type": "invoice.paid", "payload": {"a": "\ud800"}},
    "NaN in the payload": {"type": "invoice.paid", "payload": {"a": float("nan")}},
    "Infinity as the payload": {"type": "invoice.paid", "payload": float("inf")},
    "-Infinity in the payload": {"type": "invoice.paid", "payload": [float("-inf")]},
    "not an object": [],
}


@pytest.mark.parametrize("body", BAD_EVENTS.values(), ids=BAD_EVENTS.keys())
async def test_a_bad_event_is_422_and_stores_nothing(api: Api, body: Any) -> None:
    endpoint_id = await endpoint(api)
    # json.dumps escapes a lone surrogate (\ud800), which httpx's json= cannot encode.
    response = await api.http.post("/v1/events", content=json.dumps(body), headers=JSON)
    assert_problem(response, 422, "validation")
    assert await listed_ids(api) == []
    assert await all_task_ids(api) == []
    assert (await api.http.get(f"/v1/endpoints/{endpoint_id}/tasks")).json()["tasks"] == []


@pytest.mark.parametrize(
    ("content", "headers", "status", "slug"),
    [
        (b'{"type": ', {"content-type": "application/json"}, 400, "malformed-json"),
        (
            b'{"type": "invoice.paid", "payload": 1}',
            {"content-type": "text/plain"},
            415,
            "unsupported-media-type",
        ),
    ],
)
async def test_a_body_that_is_not_an_event_stores_nothing(
    api: Api, content: bytes, headers: dict[str, str], status: int, slug: str
) -> None:
    await endpoint(api)
    assert_problem(await api.http.post("/v1/events", content=content, headers=headers), status, slug)
    assert await listed_ids(api) == []
    assert await all_task_ids(api) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"payload": "x" * (SMALL_LIMIT - 1)},  # 65 bytes as JSON: the quotes count
        {"payload": {"a": "y" * SMALL_LIMIT}},
        {"payload_base64": base64.b64encode(b"z" * (SMALL_LIMIT + 1)).decode()},
        {"payload": "\u00e9" * 32},  # 32 characters, 66 bytes of UTF-8 as JSON
    ],
)
async def test_a_payload_over_the_limit_is_413_and_stores_nothing(
    small_api: Api, fields: dict[str, Any]
) -> None:
    api = small_api
    endpoint_id = await endpoint(api)
    response = await api.http.post("/v1/events", json={"type": "invoice.paid", **fields})
    problem = assert_problem(response, 413, "too-large")
    assert "WORKLY_MAX_BODY_BYTES" in problem["detail"]
    assert await listed_ids(api) == []
    assert await all_task_ids(api) == []
    assert (await api.http.get(f"/v1/endpoints/{endpoint_id}/tasks")).json()["tasks"] == []


async def test_a_payload_at_the_limit_is_published(small_api: Api) -> None:
    await endpoint(small_api)
    exact = "x" * (SMALL_LIMIT - 2)  # with its quotes, exactly the limit
    event = await publish(small_api, payload=exact)
    assert len(base64.b64decode(event["payload_base64"])) == SMALL_LIMIT
    raw = await publish(small_api, payload_base64=base64.b64encode(b"r" * SMALL_LIMIT).decode())
    assert len(raw["deliveries"]) == 1
