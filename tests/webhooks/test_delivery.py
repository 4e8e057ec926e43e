"""Events delivered for real: a service with its dispatcher, receivers on 127.0.0.1, and
signatures checked with the standardwebhooks library against each endpoint's own secret.
Both backends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.receiver import Receiver, _verify, running_receiver
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.service import Service


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver() as receiver:
        yield receiver


@pytest.fixture
async def workly(database_url: str) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings = Settings(
        database_url=database_url,
        signing_secret=TEST_SECRET,
        outbound_allow="127.0.0.0/8",
        breaker_threshold=3,
        breaker_cooldown=0.2,
        poll_interval=0.2,
    )
    async with in_process(settings) as running:
        yield running


async def create_endpoint(http: httpx.AsyncClient, url: str, **fields: Any) -> dict[str, Any]:
    response = await http.post("/v1/endpoints", json={"url": url, **fields})
    assert response.status_code == 201, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def secret_of(http: httpx.AsyncClient, endpoint_id: str) -> str:
    response = await http.get(f"/v1/endpoints/{endpoint_id}/secret")
    assert response.status_code == 200, response.text
    secret: str = response.json()["signing_secret"]
    return secret


async def test_an_event_reaches_each_subscribed_endpoint_signed_with_its_own_secret(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    paid = await create_endpoint(http, receiver.url("/a"), event_types=["invoice.paid"])
    prefix = await create_endpoint(http, receiver.url("/b"), event_types=["invoice.*"])
    other = await create_endpoint(http, receiver.url("/c"), event_types=["user.created"])
    response = await http.post("/v1/events", json={"type": "invoice.paid", "payload": {"amount": 12}})
    assert response.status_code == 201, response.text
    event = response.json()
    assert {d["endpoint_id"] for d in event["deliveries"]} == {paid["id"], prefix["id"]}
    [a] = await receiver.wait_for("/a", 1)
    [b] = await receiver.wait_for("/b", 1)
    assert receiver.at("/c") == []
    for request, endpoint in ((a, paid), (b, prefix)):
        assert request.headers["webhook-id"] == event["id"]
        assert request.body == b'{"amount":12}'
        assert _lowered(request.headers)["content-type"] == "application/json"
        assert _verify(await secret_of(http, endpoint["id"]), request.body, request.headers)
        assert not _verify(await secret_of(http, other["id"]), request.body, request.headers)


def _lowered(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


async def wait_until(check: Any, timeout: float = 15.0) -> None:
    """Poll an async predicate (observable state, not a sleep) until it holds."""
    import asyncio

    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.05)


async def test_a_failing_endpoint_costs_threshold_plus_probes_and_its_backlog_drains_after(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    service, http = workly
    endpoint = await create_endpoint(http, receiver.url("/down"))
    receiver.script("/down", [500] * 6)  # 3 to open the breaker, then 3 failed probes
    published = []
    for n in range(30):
        response = await http.post("/v1/events", json={"type": "order.created", "payload": {"n": n}})
        assert response.status_code == 201, response.text
        published.append(response.json()["id"])
    await receiver.wait_for("/down", 36, timeout=30)
    got = receiver.at("/down")
    assert len(got) == 36  # 6 failed attempts, then each of the 30 once
    assert sorted({r.headers["webhook-id"] for r in got[6:]}) == sorted(published)
    # The breaker let one attempt through at a time once the endpoint was failing.
    state = (await http.get(f"/v1/endpoints/{endpoint['id']}")).json()
    assert state["health"]["state"] == "healthy"
    assert state["health"]["last_success_at"] is not None
    tasks = (await http.get(f"/v1/endpoints/{endpoint['id']}/tasks", params={"limit": 100})).json()["tasks"]
    assert sum(t["attempts"] for t in tasks) == 36  # held tasks spent no attempts

    async def all_succeeded() -> bool:
        found = (await http.get(f"/v1/endpoints/{endpoint['id']}/tasks", params={"limit": 100})).json()
        return all(t["status"] == "succeeded" for t in found["tasks"])

    await wait_until(all_succeeded)
    await service.dispatcher.settle()  # each recorded batch counted in the metrics too
    metrics = (await http.get("/metrics")).text
    assert 'workly_breaker_transitions_total{to="open"} 1.0' in metrics
    assert 'workly_breaker_transitions_total{to="closed"} 1.0' in metrics
    # Every endpoint's deliveries share one queue label; no series names an endpoint.
    assert 'workly_deliveries_total{outcome="succeeded",queue="endpoints"} 30.0' in metrics
    assert "workly_endpoint_deliveries_total{" not in metrics and endpoint["id"] not in metrics
    service.metrics.set_endpoint_states({"healthy": 1})  # what the housekeeper's periodic job sets
    assert 'workly_endpoints{state="healthy"} 1.0' in (await http.get("/metrics")).text


async def test_a_410_disables_the_endpoint_and_a_workly_subscriber_hears_of_it(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    gone = await create_endpoint(http, receiver.url("/gone"), event_types=["invoice.*"])
    ops = await create_endpoint(http, receiver.url("/ops"), event_types=["workly.*"])
    receiver.script("/gone", [410])
    response = await http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})
    assert [d["endpoint_id"] for d in response.json()["deliveries"]] == [gone["id"]]
    notices = await receiver.wait_for("/ops", 2)
    kinds = sorted(json.loads(r.body)["type"] for r in notices)
    assert kinds == ["workly.endpoint.disabled", "workly.task.failed"]
    for notice in notices:
        assert _verify(await secret_of(http, ops["id"]), notice.body, notice.headers)
    state = (await http.get(f"/v1/endpoints/{gone['id']}")).json()
    assert state["enabled"] is False
    assert state["health"]["state"] == "disabled"
    assert "410" in state["health"]["disabled_reason"]
    # Disabled: no new events reach it ...
    response = await http.post("/v1/events", json={"type": "invoice.paid", "payload": {"again": True}})
    assert response.json()["deliveries"] == []
    # ... and enabling it lets it take events again (and says so).
    assert (await http.post(f"/v1/endpoints/{gone['id']}/enable")).json()["enabled"] is True
    notices = await receiver.wait_for("/ops", 3)
    assert json.loads(notices[-1].body)["type"] == "workly.endpoint.enabled"


async def test_a_failing_workly_subscriber_never_makes_notices_about_its_own_notices(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    service, http = workly
    ops = await create_endpoint(http, receiver.url("/ops"), event_types=["workly.*"], max_attempts=1)
    await create_endpoint(http, receiver.url("/gone"), event_types=["invoice.*"], max_attempts=1)
    receiver.script("/gone", [500])
    receiver.script("/ops", [500] * 10)
    await http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})
    # One notice (the invoice delivery failed); it fails too, and that makes no new notice.
    await receiver.wait_for("/ops", 1)
    await wait_until(lambda: _settled(http, ops["id"]))
    await service.dispatcher.settle()  # every result recorded, so every notice it makes begun,
    await service.webhooks.drain_own_events()  # and published
    events = (await http.get("/v1/events", params={"type": "workly.task.failed"})).json()["events"]
    assert len(events) == 1


async def _settled(http: httpx.AsyncClient, endpoint_id: str) -> bool:
    tasks = (await http.get(f"/v1/endpoints/{endpoint_id}/tasks")).json()["tasks"]
    return bool(tasks) and all(t["status"] == "failed" for t in tasks)


async def test_plain_tasks_get_a_breaker_per_origin(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    """Only the signs of an origin in trouble count (here 503); while its breaker is open its
    tasks wait and spend no attempts, and another origin's tasks flow."""
    _, http = workly
    await http.put("/v1/queues/plain", json={"max_concurrency": 1})
    receiver.script("/flaky", [500, 500, 503, 503, 503, 503])  # two 500s count for nothing
    async with running_receiver() as elsewhere:
        tasks = [{"url": receiver.url("/flaky"), "body": {"n": n}} for n in range(10)]
        tasks += [{"url": elsewhere.url("/ok"), "body": {"n": n}} for n in range(5)]
        response = await http.post("/v1/queues/plain/tasks/batch", json={"tasks": tasks})
        assert response.status_code == 201, response.text
        await elsewhere.wait_for("/ok", 5)
        # 2 x 500, 3 x 503 open the breaker, one failed probe (503), then all ten once.
        await receiver.wait_for("/flaky", 16, timeout=30)
    flaky = receiver.at("/flaky")
    assert len(flaky) == 16
    # The third 503 opened the breaker: the next attempt (the probe) waited out the
    # cool-down, where without a breaker the other nine tasks would have gone at once.
    assert flaky[5].at - flaky[4].at >= 0.2
    assert flaky[6].at - flaky[5].at >= 0.4  # the failed probe doubled it
    listed = (await http.get("/v1/queues/plain/tasks", params={"limit": 100})).json()["tasks"]
    assert sum(t["attempts"] for t in listed if "/flaky" in t["url"]) == 16


async def test_per_endpoint_series_only_when_asked_for(database_url: str, receiver: Receiver) -> None:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, outbound_allow="127.0.0.0/8",
        poll_interval=0.2, metrics_per_endpoint=True,
    )  # fmt: skip
    async with in_process(settings) as (service, http):
        endpoint = await create_endpoint(http, receiver.url("/each"))
        for n in range(3):
            assert (await http.post("/v1/events", json={"type": "t", "payload": {"n": n}})).status_code == 201
        await receiver.wait_for("/each", 3)

        per_endpoint = (
            f'workly_endpoint_deliveries_total{{endpoint="{endpoint["id"]}",outcome="succeeded"}} 3.0'
        )

        async def counted() -> bool:
            await service.dispatcher.settle()
            return per_endpoint in (await http.get("/metrics")).text

        await wait_until(counted)
        metrics = (await http.get("/metrics")).text
    assert 'queue="endpoints"' not in metrics
    assert f'workly_deliveries_total{{outcome="succeeded",queue="{endpoint["id"]}"}} 3.0' in metrics
