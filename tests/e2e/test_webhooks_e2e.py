"""The webhook platform end to end: the real CLI (`workly dev` on SQLite, or two `workly
serve` worker processes on one PostgreSQL database), a receiver on 127.0.0.1 that verifies
signatures with the standardwebhooks library, and only the HTTP API in between.

Two processes share one database: the breaker that holds a failing endpoint's backlog and
the endpoint's max_concurrency hold across both, because both live in the database.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import create_endpoint, dev_args, drop_workly_env, serve_args
from tests.support.receiver import Receiver, _verify, running_receiver
from tests.support.servers import AUTH, TEST_SECRET, TEST_SERVER_ENV, free_port, wait_ready, workly_subprocess

pytestmark = pytest.mark.e2e
THRESHOLD = 15  # the first 15 failures open the breaker; the next 5 are its probes
FAILURES = 20
BACKLOG = 200


@pytest.fixture(params=["dev", pytest.param("serve", marks=pytest.mark.postgres)])
def server_command(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], dict[str, str], int]:
    env = {
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        **TEST_SERVER_ENV,
        "WORKLY_POLL_INTERVAL": "0.2",
        "WORKLY_LOG_LEVEL": "warning",
        "WORKLY_BREAKER_THRESHOLD": str(THRESHOLD),
        # Short, so that five doubling cool-downs (0.01 … 0.16 s) pass quickly.
        "WORKLY_BREAKER_COOLDOWN": "0.01",
    }
    port = free_port()
    if request.param == "serve":
        env["WORKLY_DATABASE_URL"] = request.getfixturevalue("pg_fresh_db")
        args = [*serve_args(port), "--workers", "2"]
    else:
        args = dev_args(tmp_path / "workly.db", port)
    drop_workly_env(monkeypatch)
    return args, env, port


async def secret(client: httpx.AsyncClient, endpoint_id: str) -> str:
    value: str = (await client.get(f"/v1/endpoints/{endpoint_id}/secret")).json()["signing_secret"]
    return value


async def publish(client: httpx.AsyncClient, event_type: str, payload: Any) -> dict[str, Any]:
    response = await client.post("/v1/events", json={"type": event_type, "payload": payload})
    assert response.status_code == 201, response.text
    event: dict[str, Any] = response.json()
    return event


async def until(check: Any, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.05)


async def test_fan_out_breaker_and_disable_end_to_end(
    server_command: tuple[list[str], dict[str, str], int], tmp_path: Path
) -> None:
    args, env, port = server_command
    log = tmp_path / "workly.log"
    async with running_receiver() as receiver:
        with workly_subprocess(args, env, port, log) as server:
            await asyncio.to_thread(wait_ready, server, port, log)
            async with httpx.AsyncClient(
                headers=AUTH, base_url=f"http://127.0.0.1:{port}", timeout=10
            ) as client:
                await fan_out(client, receiver)
                await breaker_holds_the_backlog(client, receiver)
                await gone_disables(client, receiver)


async def fan_out(client: httpx.AsyncClient, receiver: Receiver) -> None:
    """Three endpoints, two subscribed: one delivery each, the same webhook-id, each signed
    with its own endpoint's secret."""
    a = await create_endpoint(client, receiver.url("/fan/a"), event_types=["invoice.paid"])
    b = await create_endpoint(client, receiver.url("/fan/b"), event_types=["invoice.*"])
    await create_endpoint(client, receiver.url("/fan/c"), event_types=["user.created"])
    event = await publish(client, "invoice.paid", {"invoice": 1042})
    [got_a] = await receiver.wait_for("/fan/a", 1)
    [got_b] = await receiver.wait_for("/fan/b", 1)
    assert got_a.headers["webhook-id"] == got_b.headers["webhook-id"] == event["id"]
    assert _verify(await secret(client, a["id"]), got_a.body, got_a.headers)
    assert _verify(await secret(client, b["id"]), got_b.body, got_b.headers)
    assert not _verify(await secret(client, a["id"]), got_b.body, got_b.headers)
    assert receiver.at("/fan/c") == []


async def breaker_holds_the_backlog(client: httpx.AsyncClient, receiver: Receiver) -> None:
    """A receiver failing 20 times in a row sees threshold + probes attempts while a backlog
    of 200 waits, then all 200 once it recovers, never more than max_concurrency at once."""
    receiver.script("/down", [503] * FAILURES)
    receiver.delay("/down", 0.005)
    endpoint = await create_endpoint(
        client, receiver.url("/down"), event_types=["order.*"], max_concurrency=4
    )
    published = [(await publish(client, "order.created", {"n": n}))["id"] for n in range(BACKLOG)]
    await receiver.wait_for("/down", FAILURES + BACKLOG, timeout=90)
    got = receiver.at("/down")
    assert len(got) == FAILURES + BACKLOG  # no attempt beyond threshold + probes
    assert sorted(r.headers["webhook-id"] for r in got[FAILURES:]) == sorted(published)
    assert receiver.peak_at["/down"] <= 4  # across both processes

    async def healthy() -> bool:
        found = (await client.get(f"/v1/endpoints/{endpoint['id']}")).json()
        return bool(found["health"]["state"] == "healthy")

    await until(healthy)


async def gone_disables(client: httpx.AsyncClient, receiver: Receiver) -> None:
    receiver.script("/gone", [410])
    endpoint = await create_endpoint(client, receiver.url("/gone"), event_types=["gone.*"])
    await publish(client, "gone.now", {})

    async def disabled() -> bool:
        found = (await client.get(f"/v1/endpoints/{endpoint['id']}")).json()
        return found["enabled"] is False and "410" in (found["health"]["disabled_reason"] or "")

    await until(disabled)
    event = await publish(client, "gone.again", {})
    assert event["deliveries"] == []
