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


@pytest.mark.parametrize("path", ["/v1/queues/q/tasks", "/v1/queues/q/tasks/batch", "/v1/events"])
async def test_oversized_trace_headers_are_ignored_never_refused(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver, path: str
) -> None:
    _, http = workly
    if path == "/v1/events":
        assert (await http.post("/v1/endpoints", json={"url": receiver.url("/big")})).status_code == 201
    task = {"url": receiver.url("/big")}
    bodies = {"/v1/events": {"type": "a.b", "payload": {}}, "/v1/queues/q/tasks": task,
              "/v1/queues/q/tasks/batch": {"tasks": [task]}}  # fmt: skip
    headers = {"traceparent": INCOMING["traceparent"], "tracestate": "k=" + "v" * 2000}
    assert (await http.post(path, json=bodies[path], headers=headers)).status_code == 201
    headers = {"traceparent": INCOMING["traceparent"] + "-" + "x" * 2000}
    assert (await http.post(path, json=bodies[path], headers=headers)).status_code == 201
    first, second = await receiver.wait_for("/big", 2)
    assert first.headers["traceparent"].split("-")[1] == TRACE  # the trace kept, its state dropped
    assert "tracestate" not in {name.lower() for name in first.headers}
    assert "traceparent" not in {name.lower() for name in second.headers}


async def test_repeated_tracestate_headers_are_joined(
    workly: tuple[Service, httpx.AsyncClient], receiver: Receiver
) -> None:
    _, http = workly
    headers = [("traceparent", INCOMING["traceparent"]), ("tracestate", "a=1"), ("tracestate", "b=2")]
    for path, body in (("/v1/queues/q/tasks", {"url": receiver.url("/s")}),
                       ("/v1/queues/q/tasks/batch", {"tasks": [{"url": receiver.url("/s")}]})):  # fmt: skip
        assert (await http.post(path, json=body, headers=headers)).status_code == 201
    assert [r.headers["tracestate"] for r in await receiver.wait_for("/s", 2)] == ["a=1,b=2"] * 2
