"""A traceparent on an enqueue or a publish reaches every attempt's delivery: the same trace
id, a new span id per attempt, the flags and tracestate kept. Real service and dispatcher,
a receiver on 127.0.0.1, both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.receiver import Received, Receiver, running_receiver
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.service import Service
from workly.trace_context import parse_trace_context

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
INCOMING = {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01", "tracestate": "vendor=opaque"}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver() as running:
        yield running


@pytest.fixture
async def workly(database_url: str) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, outbound_allow="127.0.0.0/8", poll_interval=0.1
    )
    async with in_process(settings) as running:
        yield running


def span_ids(requests: list[Received]) -> list[str]:
    ids = []
    for request in requests:
        context = parse_trace_context(request.headers["traceparent"], request.headers.get("tracestate"))
        assert context is not None
        assert (context.trace_id, context.flags, context.tracestate) == (TRACE, "01", "vendor=opaque")
        ids.append(context.parent_id)
    return ids


async def test_each_attempt_continues_the_enqueues_trace_with_its_own_span(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    receiver.script("/flaky", [503])
    own = {"traceparent": f"00-{'f' * 32}-{'f' * 16}-01"}
    body = {"url": receiver.url("/flaky"), "min_backoff": 0, "max_backoff": 0, "headers": own}
    response = await http.post("/v1/queues/q/tasks", json=body, headers=INCOMING)
    assert response.status_code == 201, response.text
    attempts = await receiver.wait_for("/flaky", 2)
    ids = span_ids(attempts)
    assert len({*ids, "00f067aa0ba902b7"}) == 3  # a new span per attempt, neither the caller's
    # The request's own trace context wins over a traceparent among the task's headers.
    assert all("ffffffff" not in r.headers["traceparent"] for r in attempts)


async def test_a_batch_and_an_event_carry_the_trace_too(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    tasks = {"tasks": [{"url": receiver.url("/batch")}, {"url": receiver.url("/batch")}]}
    assert (await http.post("/v1/queues/q/tasks/batch", json=tasks, headers=INCOMING)).status_code == 201
    endpoint = await http.post("/v1/endpoints", json={"url": receiver.url("/event")})
    assert endpoint.status_code == 201, endpoint.text
    published = await http.post("/v1/events", json={"type": "a.b", "payload": {}}, headers=INCOMING)
    assert published.status_code == 201, published.text
    assert len(set(span_ids(await receiver.wait_for("/batch", 2)))) == 2
    span_ids(await receiver.wait_for("/event", 1))


@pytest.mark.parametrize("traceparent", [None, "00-nonsense-01", f"00-{TRACE}-0000000000000000-01"])
async def test_without_a_valid_traceparent_a_delivery_carries_only_its_own_headers(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver, traceparent: str | None
) -> None:
    _, http = workly
    headers = {} if traceparent is None else {"traceparent": traceparent}
    body = {"url": receiver.url("/plain"), "headers": {"tracestate": "mine=1"}}
    assert (await http.post("/v1/queues/q/tasks", json=body, headers=headers)).status_code == 201
    [delivered] = await receiver.wait_for("/plain", 1)
    assert "traceparent" not in {name.lower() for name in delivered.headers}
    assert delivered.headers["tracestate"] == "mine=1"  # the task's own header, as enqueued


async def test_an_overlong_trace_header_is_refused_and_stores_nothing(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    service, http = workly
    response = await http.post(
        "/v1/queues/q/tasks", json={"url": receiver.url("/x")}, headers={"traceparent": "0" * 2000}
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert await service.list_queues() == []
