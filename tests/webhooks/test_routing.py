"""Envelopes, test events and replay delivered for real: a service with its dispatcher and
operation runner, receivers on 127.0.0.1, signatures checked with the standardwebhooks
library. Both backends."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.support.receiver import Receiver, _verify, running_receiver
from tests.support.servers import TEST_SECRET, in_process
from tests.webhooks.test_delivery import create_endpoint, secret_of
from workly.config import Settings
from workly.service import Service


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver() as receiver:
        yield receiver


@pytest.fixture
async def workly(database_url: str) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, outbound_allow="127.0.0.0/8", poll_interval=0.2
    )
    async with in_process(settings) as running:
        yield running


async def publish(http: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await http.post("/v1/events", json=fields)
    assert response.status_code == 201, response.text
    event: dict[str, Any] = response.json()
    return event


async def wait_operation(http: httpx.AsyncClient, operation_id: str) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            operation: dict[str, Any] = (await http.get(f"/v1/operations/{operation_id}")).json()
            if operation["state"] != "running":
                return operation
            await asyncio.sleep(0.05)  # polling the API's answer, as a client would


async def test_an_envelope_is_delivered_as_signed(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    enveloped = await create_endpoint(http, receiver.url("/env"), payload_format="envelope")
    raw = await create_endpoint(http, receiver.url("/raw"))
    event = await publish(http, type="invoice.paid", payload={"z": 1, "a": [1.50, "é"]})
    [delivered] = await receiver.wait_for("/env", 1)
    [plain] = await receiver.wait_for("/raw", 1)
    created = datetime.fromisoformat(event["created_at"]).astimezone(UTC)
    stamp = created.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    payload = b'{"z":1,"a":[1.5,"\xc3\xa9"]}'
    assert (
        delivered.body
        == b'{"type":"invoice.paid","timestamp":"' + stamp.encode() + b'","data":' + payload + b"}"
    )
    assert plain.body == payload
    assert delivered.headers["Content-Type"] == "application/json"
    assert delivered.headers["webhook-id"] == event["id"]
    assert _verify(await secret_of(http, enveloped["id"]), delivered.body, delivered.headers)
    assert not _verify(await secret_of(http, raw["id"]), delivered.body, delivered.headers)
    switched = await http.patch(f"/v1/endpoints/{raw['id']}", json={"payload_format": "envelope"})
    assert switched.json()["payload_format"] == "envelope"
    await publish(http, type="user.x", payload_base64="AAEC")
    [_, second] = await receiver.wait_for("/raw", 2)
    assert json.loads(second.body)["data_base64"] == "AAEC" and json.loads(second.body)["type"] == "user.x"
    assert second.headers["Content-Type"] == "application/json"  # the envelope is JSON, whatever it holds
    assert _verify(await secret_of(http, raw["id"]), second.body, second.headers)


async def test_a_test_event_sends_the_types_first_example(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    example = {"id": "in_1", "amount": 5}
    assert (
        await http.put("/v1/event-types/invoice.paid", json={"examples": [example, {"x": 2}]})
    ).status_code == 201
    endpoint = await create_endpoint(http, receiver.url("/t"), event_types=["user.*"])
    answer = await http.post(f"/v1/endpoints/{endpoint['id']}/test", json={"type": "invoice.paid"})
    assert answer.status_code == 202, answer.text
    task = answer.json()
    assert task["test"] is True and task["endpoint_id"] == endpoint["id"] and task["event_id"] is None
    [got] = await receiver.wait_for("/t", 1)
    assert json.loads(got.body) == example  # whatever the endpoint subscribes to
    assert got.headers["webhook-id"] == task["id"]
    assert _verify(await secret_of(http, endpoint["id"]), got.body, got.headers)
    # No type, or a type without examples: {"type": "workly.test"}, enveloped for an envelope endpoint.
    await http.put("/v1/event-types/user.created", json={})
    await http.patch(f"/v1/endpoints/{endpoint['id']}", json={"payload_format": "envelope"})
    for body in (None, {"type": "user.created"}):
        sent = await http.post(f"/v1/endpoints/{endpoint['id']}/test", json=body)
        assert sent.status_code == 202, sent.text
    _, bare, typed = await receiver.wait_for("/t", 3)
    assert (
        json.loads(bare.body)["data"] == {"type": "workly.test"}
        and json.loads(bare.body)["type"] == "workly.test"
    )
    assert json.loads(typed.body)["type"] == "user.created" and json.loads(typed.body)["data"] == {
        "type": "workly.test"
    }
    shown = (await http.get(f"/v1/tasks/{task['id']}")).json()
    assert shown["test"] is True and shown["status"] == "succeeded"


async def test_a_test_event_is_refused_for_an_unknown_type_a_disabled_or_missing_endpoint(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    endpoint = await create_endpoint(http, receiver.url("/t"))
    unknown = await http.post(f"/v1/endpoints/{endpoint['id']}/test", json={"type": "never.declared"})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["path"] == "/type"
    await http.post(f"/v1/endpoints/{endpoint['id']}/disable")
    assert (await http.post(f"/v1/endpoints/{endpoint['id']}/test")).status_code == 409
    assert (await http.post("/v1/endpoints/ep_nope/test")).status_code == 404
    assert (await http.post(f"/v1/endpoints/{endpoint['id']}/test", json={"kind": 1})).status_code == 422
    tasks = (await http.get(f"/v1/endpoints/{endpoint['id']}/tasks")).json()["tasks"]
    assert tasks == []


async def test_replay_delivers_exactly_the_missing_matching_events_once(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    since = datetime.now(UTC).isoformat()
    early = [
        await publish(http, type=t, payload={"n": n}, labels={"region": r})
        for n, (t, r) in enumerate(
            [("invoice.paid", "eu"), ("invoice.paid", "us"), ("user.x", "eu"), ("invoice.sent", "eu")]
        )
    ]
    await publish(http, type="invoice.paid", tenant="acme", payload={"n": "other tenant"})
    late = await create_endpoint(
        http, receiver.url("/late"), event_types=["invoice.*"], filter={"labels.region": "eu"}
    )
    answer = await http.post(f"/v1/endpoints/{late['id']}/replay", json={"since": since})
    assert answer.status_code == 202, answer.text
    assert answer.json()["action"] == "replay" and answer.json()["filter"]["endpoint_id"] == late["id"]
    done = await wait_operation(http, answer.json()["id"])
    assert (done["state"], done["matched"], done["changed"], done["skipped"]) == ("succeeded", 4, 2, 2)
    got = await receiver.wait_for("/late", 2)
    assert sorted(r.headers["webhook-id"] for r in got) == sorted([early[0]["id"], early[3]["id"]])
    secret = await secret_of(http, late["id"])
    assert all(_verify(secret, r.body, r.headers) for r in got)
    again = await wait_operation(
        http, (await http.post(f"/v1/endpoints/{late['id']}/replay", json={"since": since})).json()["id"]
    )
    assert (again["changed"], again["skipped"]) == (0, 4)  # received already: nothing twice


async def test_replay_under_concurrent_publishing_never_delivers_an_event_twice(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    since = datetime.now(UTC).isoformat()
    before = [(await publish(http, type="a.b", payload={"n": n}))["id"] for n in range(150)]
    endpoint = await create_endpoint(http, receiver.url("/r"))
    stop = asyncio.Event()
    during: list[str] = []

    async def keep_publishing() -> None:
        n = 0
        while not stop.is_set() or n < 20:
            during.append((await publish(http, type="a.b", payload={"during": n}))["id"])
            n += 1

    publisher = asyncio.create_task(keep_publishing())
    first = await http.post(f"/v1/endpoints/{endpoint['id']}/replay", json={"since": since})
    assert first.status_code == 202, first.text
    second = await http.post(f"/v1/endpoints/{endpoint['id']}/replay", json={"since": since})
    if second.status_code == 409:  # the first still runs: one replay of an endpoint at a time
        assert first.json()["id"] in second.json()["detail"]
    await wait_operation(http, first.json()["id"])
    third = await http.post(f"/v1/endpoints/{endpoint['id']}/replay", json={"since": since})
    assert third.status_code == 202, third.text  # replaying again finds nothing missing
    assert (await wait_operation(http, third.json()["id"]))["changed"] == 0
    stop.set()
    await publisher
    expected = before + during
    got = await receiver.wait_for("/r", len(expected), timeout=60)
    counted = Counter(r.headers["webhook-id"] for r in got)
    assert set(counted) == set(expected) and max(counted.values()) == 1
    tasks = (await http.get(f"/v1/endpoints/{endpoint['id']}/tasks", params={"limit": 500})).json()["tasks"]
    assert len(tasks) == len(expected)


async def test_workly_s_own_events_are_not_enveloped_twice(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    await create_endpoint(http, receiver.url("/ops"), event_types=["workly.*"], payload_format="envelope")
    other = await create_endpoint(http, receiver.url("/other"), event_types=["x.y"])
    await http.post(f"/v1/endpoints/{other['id']}/disable")
    [notice] = await receiver.wait_for("/ops", 1)
    body = json.loads(notice.body)
    assert body["type"] == "workly.endpoint.disabled" and body["data"]["id"] == other["id"]
