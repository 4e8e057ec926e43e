"""The deliverer's request: the task's headers, one user-agent, Workly's signature headers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tests.support.raw_server import OK, answering, raw_server
from tests.support.servers import TEST_SECRET
from workly.clock import SystemClock
from workly.dispatch.deliverer import USER_AGENT, Deliverer
from workly.dispatch.http import HttpClient
from workly.models import ClaimedTask
from workly.signing import Signer
from workly.ssrf_guard import LOOPBACK, OutboundPolicy
from workly.trace_context import TraceContext
from workly.tracing import AttemptTrace, Tracing

LOCAL = OutboundPolicy(LOOPBACK)  # the receivers here listen on 127.0.0.1


def claimed(url: str, headers: dict[str, str]) -> ClaimedTask:
    return ClaimedTask(
        seq=1, id="task_1", queue="q", url=url, method="POST", headers=headers, body=b"{}", attempt=1,
        max_attempts=3, timeout=5, min_backoff=1, max_backoff=10, lease_token="lease",
    )  # fmt: skip


async def header_lines(headers: dict[str, str]) -> list[bytes]:
    seen: list[bytes] = []
    client = HttpClient(policy=LOCAL)
    try:
        async with raw_server(answering(OK, record=seen)) as server:
            outcome = await Deliverer(client, Signer([TEST_SECRET]), SystemClock()).deliver(
                claimed(server.url + "/", headers)
            )
    finally:
        await client.close()
    assert outcome.status_code == 204
    return [line.lower() for line in seen[0].split(b"\r\n\r\n")[0].split(b"\r\n")[1:]]


async def test_the_default_user_agent_is_sent_once() -> None:
    lines = await header_lines({})
    assert [line for line in lines if line.startswith(b"user-agent:")] == [
        b"user-agent: " + USER_AGENT.lower().encode()
    ]


async def test_a_tasks_user_agent_replaces_the_default_whatever_its_case() -> None:
    lines = await header_lines({"User-Agent": "Mine/1"})
    assert [line for line in lines if line.startswith(b"user-agent:")] == [b"user-agent: mine/1"]


async def test_signature_headers_cannot_be_spoofed_by_the_task() -> None:
    lines = await header_lines({"WEBHOOK-ID": "spoofed", "Webhook-Signature": "v1,forged"})
    assert [line for line in lines if line.startswith(b"webhook-id:")] == [b"webhook-id: task_1"]
    signatures = [line for line in lines if line.startswith(b"webhook-signature:")]
    assert len(signatures) == 1
    assert b"forged" not in signatures[0]


class RecordingTracing(Tracing):
    """Spans on, recorded here instead of exported."""

    enabled = True

    def __init__(self) -> None:
        self.attempts: list[dict[str, object]] = []

    @contextmanager
    def attempt(
        self, method: str, context: TraceContext | None, attributes: Mapping[str, Any]
    ) -> Iterator[AttemptTrace]:
        with super().attempt(method, context, attributes) as span:
            yield span
            self.attempts.append({**attributes, **span.attributes, "failed": span.failed})


async def test_a_url_whose_host_does_not_decode_is_still_attempted_with_spans_on() -> None:
    """yarl cannot decode the IDNA label xn--a; the span names the raw host, and the
    attempt goes on (here: no such host) instead of the deliverer raising."""
    tracing = RecordingTracing()

    async def nowhere(host: str, port: int) -> list[str]:
        raise OSError("no such host")  # never a real lookup

    client = HttpClient(policy=LOCAL, resolver=nowhere)
    try:
        outcome = await Deliverer(client, Signer([TEST_SECRET]), SystemClock(), tracing=tracing).deliver(
            claimed("http://xn--a.com/hook", {})
        )
    finally:
        await client.close()
    assert outcome.error is not None and "cannot resolve" in outcome.error
    [span] = tracing.attempts
    assert span["server.address"] == "xn--a.com"
    assert span["failed"] == outcome.error
