"""The deliverer's request: the task's headers, one user-agent, Workly's signature headers."""

from __future__ import annotations

from tests.support.raw_server import OK, answering, raw_server
from tests.support.servers import TEST_SECRET
from workly.clock import system_clock
from workly.dispatch.deliverer import USER_AGENT, Deliverer
from workly.dispatch.http import HttpClient
from workly.models import ClaimedTask
from workly.outbound import LOOPBACK, OutboundPolicy
from workly.signing import Signer

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
            outcome = await Deliverer(client, Signer([TEST_SECRET]), system_clock).deliver(
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
