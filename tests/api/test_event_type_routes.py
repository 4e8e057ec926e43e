"""The event catalogue over the API (docs/webhooks.md): event types with JSON Schema 2020-12,
validation on publish with JSON Pointer errors, and strict mode. Both backends; the
dispatcher is off (nothing is sent)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.api.conftest import HOOK, Api, assert_problem
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings

INVOICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "amount", "customer"],
    "properties": {
        "id": {"type": "string", "pattern": "^in_"},
        "amount": {"type": "integer", "minimum": 0},
        "paid_at": {"type": "string", "format": "date-time"},
        "customer": {"$ref": "#/$defs/customer"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
    },
    "$defs": {
        "customer": {
            "type": "object",
            "required": ["email"],
            "properties": {"email": {"type": "string", "format": "email"}},
        },
        "line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}},
    },
}
INVOICE = {"id": "in_1", "amount": 4200, "customer": {"email": "ada@example.com"}, "lines": [{"sku": "a"}]}
TYPE_FIELDS = {"type", "description", "schema", "examples", "deprecated", "created_at", "updated_at"}


async def put_type(api: Api, name: str = "invoice.paid", expect: int = 201, **fields: Any) -> dict[str, Any]:
    response = await api.http.put(f"/v1/event-types/{name}", json=fields)
    assert response.status_code == expect, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def event_count(api: Api) -> int:
    response = await api.http.get("/v1/events", params={"limit": 500})
    assert response.status_code == 200, response.text
    return len(response.json()["events"])


# --- the catalogue ------------------------------------------------------------------------


async def test_a_type_is_declared_read_listed_changed_and_removed(api: Api) -> None:
    created = await put_type(
        api, description="An invoice was paid", schema=INVOICE_SCHEMA, examples=[INVOICE], expect=201
    )
    assert set(created) == TYPE_FIELDS
    assert created["type"] == "invoice.paid"
    assert created["schema"] == INVOICE_SCHEMA and created["examples"] == [INVOICE]
    assert created["deprecated"] is False
    assert (await api.http.get("/v1/event-types/invoice.paid")).json() == created

    replaced = await put_type(api, description="paid", expect=200)
    assert (
        replaced["schema"] is None
        and replaced["examples"] == []
        and replaced["created_at"] == created["created_at"]
    )

    patched = await api.http.patch(
        "/v1/event-types/invoice.paid", json={"deprecated": True, "schema": {"type": "object"}}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["deprecated"] is True and patched.json()["description"] == "paid"
    await put_type(api, "user.created")

    listed = (await api.http.get("/v1/event-types")).json()
    assert [t["type"] for t in listed["event_types"]] == ["user.created"] and listed["next_cursor"] is None
    everything = (await api.http.get("/v1/event-types", params={"include_deprecated": "true"})).json()
    assert [t["type"] for t in everything["event_types"]] == ["user.created", "invoice.paid"]

    assert (await api.http.delete("/v1/event-types/invoice.paid")).status_code == 204
    assert_problem(await api.http.get("/v1/event-types/invoice.paid"), 404, "not-found")
    assert_problem(await api.http.delete("/v1/event-types/invoice.paid"), 404)
    assert_problem(await api.http.patch("/v1/event-types/nope", json={"deprecated": True}), 404)


async def test_list_pages_with_a_cursor(api: Api) -> None:
    for n in range(5):
        await put_type(api, f"t.n{n}")
    first = (await api.http.get("/v1/event-types", params={"limit": 3})).json()
    second = (
        await api.http.get("/v1/event-types", params={"limit": 3, "cursor": first["next_cursor"]})
    ).json()
    names = [t["type"] for t in first["event_types"] + second["event_types"]]
    assert names == [f"t.n{n}" for n in (4, 3, 2, 1, 0)] and second["next_cursor"] is None


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"schema": {"type": "nonsense"}}, "/schema/type"),
        ({"schema": {"minimum": "five"}}, "/schema/minimum"),
        ({"schema": {"type": "integer"}, "examples": [1, "two"]}, "/examples/1"),
        ({"schema": INVOICE_SCHEMA, "examples": [{**INVOICE, "amount": -5}]}, "/examples/0/amount"),
        (
            {"schema": INVOICE_SCHEMA, "examples": [{**INVOICE, "customer": {"email": "nobody"}}]},
            "/examples/0/customer/email",
        ),
    ],
)
async def test_a_bad_schema_or_example_is_a_422_with_pointers_and_stores_nothing(
    api: Api, body: dict[str, Any], pointer: str
) -> None:
    problem = assert_problem(await api.http.put("/v1/event-types/invoice.paid", json=body), 422)
    assert problem["type"] == "urn:workly:problem:invalid-event-type"
    assert pointer in [error["path"] for error in problem["errors"]], problem
    assert_problem(await api.http.get("/v1/event-types/invoice.paid"), 404)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "http://127.0.0.1:9/schema.json"},  # never fetched
        {"$ref": "#/$defs/missing"},
        {"type": "string", "pattern": "(?<=a)b"},  # look-behind: the linear-time engine has none
        {"$schema": "http://json-schema.org/draft-07/schema#"},
        [1, 2],
        "a string",
    ],
)
async def test_a_schema_that_cannot_be_used_is_refused(api: Api, schema: Any) -> None:
    assert_problem(await api.http.put("/v1/event-types/invoice.paid", json={"schema": schema}), 422)
    assert_problem(await api.http.get("/v1/event-types/invoice.paid"), 404)


async def test_bad_names_and_bodies_are_refused(api: Api) -> None:
    assert_problem(await api.http.put("/v1/event-types/workly.task.failed", json={}), 422, "reserved-name")
    bad_name = assert_problem(await api.http.put("/v1/event-types/bad type!", json={}), 422)
    assert "dot-separated words" in bad_name["detail"]
    assert_problem(await api.http.get("/v1/event-types/bad type!"), 404)
    assert_problem(await api.http.put("/v1/event-types/a.b", json={"unknown": 1}), 422)
    assert_problem(await api.http.put("/v1/event-types/a.b", json={"examples": list(range(11))}), 422)
    assert_problem(await api.http.patch("/v1/event-types/a.b", json={"deprecated": None}), 422)


# --- validation on publish ----------------------------------------------------------------


async def test_a_payload_is_validated_against_its_types_schema(api: Api) -> None:
    await put_type(api, schema=INVOICE_SCHEMA)
    ok = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": INVOICE})
    assert ok.status_code == 201, ok.text
    bad = {**INVOICE, "amount": "lots", "customer": {"email": "not-an-address"}, "lines": [{"qty": 1}]}
    refused = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": bad})
    problem = assert_problem(refused, 422, "invalid-payload")
    assert sorted(error["path"] for error in problem["errors"]) == ["/amount", "/customer/email", "/lines/0"]
    assert all(error["message"] for error in problem["errors"])
    assert "invoice.paid" in problem["detail"]
    # The root itself is "" (a JSON Pointer to the whole payload).
    root = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": [1]})
    assert [e["path"] for e in assert_problem(root, 422)["errors"]] == [""]
    raw = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload_base64": "AAEC"})
    assert_problem(raw, 422, "invalid-payload")
    assert await event_count(api) == 1  # only the valid one was stored


async def test_a_type_without_schema_and_an_unknown_type_publish_freely_in_open_mode(api: Api) -> None:
    await put_type(api, "note.added")
    for event_type in ("note.added", "never.declared"):
        response = await api.http.post("/v1/events", json={"type": event_type, "payload": [1, "x"]})
        assert response.status_code == 201, response.text


async def test_a_changed_schema_applies_to_the_next_publish(api: Api) -> None:
    await put_type(api, schema={"type": "object"})
    assert (
        await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})
    ).status_code == 201
    patched = await api.http.patch("/v1/event-types/invoice.paid", json={"schema": {"type": "array"}})
    assert patched.status_code == 200
    assert_problem(await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": {}}), 422)
    assert (await api.http.delete("/v1/event-types/invoice.paid")).status_code == 204
    assert (
        await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})
    ).status_code == 201


# --- strict mode --------------------------------------------------------------------------


@pytest.fixture
async def strict_api(database_url: str) -> AsyncIterator[Api]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, event_types="strict"
    )
    async with in_process(settings) as (_, http):
        yield Api(http)


async def test_strict_mode_publishes_only_catalogue_types(strict_api: Api) -> None:
    api = strict_api
    refused = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})
    problem = assert_problem(refused, 422, "invalid-event-type")
    assert problem["errors"] == [{"path": "/type", "message": "not in the catalogue"}]
    assert await event_count(api) == 0
    await put_type(api, deprecated=True)  # deprecated types may still be published
    assert (
        await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})
    ).status_code == 201


async def test_strict_mode_subscribes_only_to_patterns_of_catalogue_types(strict_api: Api) -> None:
    api = strict_api
    await put_type(api, "invoice.paid")
    for patterns in (["invoice.paid"], ["invoice.*"]):
        created = await api.http.post("/v1/endpoints", json={"url": HOOK, "event_types": patterns})
        assert created.status_code == 201, created.text
    for patterns in (["invoice.refunded"], ["user.*"], ["invoice.paid", "nope"]):
        refused = await api.http.post("/v1/endpoints", json={"url": HOOK, "event_types": patterns})
        assert_problem(refused, 422)
    every = await api.http.post("/v1/endpoints", json={"url": HOOK})  # null: every type
    assert every.status_code == 201
    patch = await api.http.patch(f"/v1/endpoints/{every.json()['id']}", json={"event_types": ["user.x"]})
    assert_problem(patch, 422)
    listed = (await api.http.get("/v1/endpoints")).json()["endpoints"]
    assert len(listed) == 3 and listed[0]["event_types"] is None


async def test_a_schedules_event_is_checked_as_a_publish_is_and_keeps_its_labels(api: Api) -> None:
    await put_type(api, schema=INVOICE_SCHEMA)
    bad = {"cron": "0 0 * * *", "event": {"type": "invoice.paid", "payload": {"id": "in_1"}}}
    problem = assert_problem(await api.http.post("/v1/schedules", json=bad), 422, "invalid-payload")
    assert "/amount" not in problem["detail"] and problem["errors"]
    good = {
        "cron": "0 0 * * *",
        "event": {"type": "invoice.paid", "payload": INVOICE, "labels": {"region": "eu"}},
    }
    made = await api.http.post("/v1/schedules", json=good)
    assert made.status_code == 201, made.text
    assert made.json()["event"]["labels"] == {"region": "eu"}
    fired = await api.http.post(f"/v1/schedules/{made.json()['id']}/trigger")
    event = await api.http.get(f"/v1/events/{fired.json()['last_event_id']}")
    assert event.json()["labels"] == {"region": "eu"}
    changed = await api.http.patch(
        f"/v1/schedules/{made.json()['id']}", json={"event": {"type": "invoice.paid", "payload": []}}
    )
    assert_problem(changed, 422, "invalid-payload")
    assert (await api.http.get(f"/v1/schedules/{made.json()['id']}")).json()["event"]["payload"] == INVOICE


async def test_strict_mode_refuses_a_schedule_of_an_unknown_type(strict_api: Api) -> None:
    body = {"cron": "0 0 * * *", "event": {"type": "never.declared", "payload": {}}}
    assert_problem(await strict_api.http.post("/v1/schedules", json=body), 422, "invalid-event-type")
    assert (await strict_api.http.get("/v1/schedules")).json()["schedules"] == []


async def test_a_process_that_changes_the_recorded_mode_says_so(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    for mode, warned in (("strict", False), ("strict", False), ("open", True)):
        caplog.clear()
        settings = Settings(
            database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, event_types=mode
        )
        async with in_process(settings) as (_, http):
            answer = await http.post("/v1/events", json={"type": "not.declared", "payload": {}})
            assert answer.status_code == (201 if mode == "open" else 422)
        changed = [r for r in caplog.records if "WORKLY_EVENT_TYPES=open here" in r.getMessage()]
        assert bool(changed) == warned, caplog.text


async def test_integers_beyond_64_bits_are_kept_and_compared_exactly(api: Api) -> None:
    big = 18446744073709551617
    made = await put_type(api, schema={"const": big}, examples=[big])
    assert made["schema"] == {"const": big} and made["examples"] == [big]
    assert (await api.http.get("/v1/event-types/invoice.paid")).json()["schema"] == {"const": big}
    exact = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": big})
    assert exact.status_code == 201, exact.text
    near = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": big - 1})
    assert_problem(near, 422, "invalid-payload")
    huge = await api.http.post(
        "/v1/events", content=b'{"type": "invoice.paid", "payload": ' + b"9" * 400 + b"}",
        headers={"content-type": "application/json"},
    )  # fmt: skip
    assert_problem(huge, 422, "invalid-payload")


async def test_errors_are_capped_and_a_schema_that_explodes_is_refused(api: Api) -> None:
    await put_type(api, schema={"type": "array", "items": {"type": "integer"}})
    many = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": ["x"] * 500})
    problem = assert_problem(many, 422, "invalid-payload")
    assert len(problem["errors"]) == 20 and "(and more)" in problem["detail"]
    large = await api.http.post("/v1/events", json={"type": "invoice.paid", "payload": ["x" * 100] * 400})
    assert len(assert_problem(large, 422)["errors"]) == 1  # a large payload: its first error only
    chain: dict[str, Any] = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}] * 2} for i in range(20)}
    chain["a20"] = {"type": "integer"}
    refused = await api.http.put(
        "/v1/event-types/chain.x", json={"schema": {"$ref": "#/$defs/a0", "$defs": chain}}
    )
    assert "too complex" in assert_problem(refused, 422)["detail"]
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    assert (await api.http.put("/v1/event-types/tree.x", json={"schema": tree})).status_code == 201
    assert_problem(await api.http.put("/v1/event-types/fmt.x", json={"schema": {"format": "emial"}}), 422)


async def test_a_replay_looks_back_no_further_than_retention(api: Api) -> None:
    endpoint = (await api.http.post("/v1/endpoints", json={"url": HOOK})).json()
    old = await api.http.post(
        f"/v1/endpoints/{endpoint['id']}/replay", json={"since": "2020-01-01T00:00:00Z"}
    )
    assert "WORKLY_RETENTION" in assert_problem(old, 422, "invalid-operation")["detail"]
    recent = await api.http.post(
        f"/v1/endpoints/{endpoint['id']}/replay", json={"since": "2099-01-01T00:00:00Z"}
    )
    assert recent.status_code == 202, recent.text
    assert (await api.http.get("/v1/operations")).json()["operations"][0]["id"] == recent.json()["id"]
    assert len((await api.http.get("/v1/operations")).json()["operations"]) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"filter": {"payload.amount": {"$near": 1}}},
        {"filter": {"$or": []}},
        {"filter": {"body.amount": 1}},
        {"filter": {"payload.tags": ["a"]}},
        {"filter": "labels.region == eu"},
        {"payload_format": "xml"},
    ],
)
async def test_a_malformed_filter_or_format_is_a_422_and_stores_nothing(
    api: Api, body: dict[str, Any]
) -> None:
    assert_problem(await api.http.post("/v1/endpoints", json={"url": HOOK, **body}), 422)
    assert (await api.http.get("/v1/endpoints")).json()["endpoints"] == []
    made = (await api.http.post("/v1/endpoints", json={"url": HOOK, "filter": {"labels.a": "b"}})).json()
    assert_problem(await api.http.patch(f"/v1/endpoints/{made['id']}", json=body), 422)
    assert (await api.http.get(f"/v1/endpoints/{made['id']}")).json()["filter"] == {"labels.a": "b"}


@pytest.mark.parametrize(
    "labels", [{"bad key": "x"}, {"k": 1}, {f"k{n}": "v" for n in range(11)}, {"k": "v" * 257}, ["region"]]
)
async def test_bad_labels_are_a_422_and_store_nothing(api: Api, labels: Any) -> None:
    assert_problem(
        await api.http.post("/v1/events", json={"type": "a.b", "payload": {}, "labels": labels}), 422
    )
    assert await event_count(api) == 0
