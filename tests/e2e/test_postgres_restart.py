"""PostgreSQL restarts under a running `workly serve`: the service recovers by itself.

While the database is down /health/ready answers 503 and enqueues a 503 problem; once it
is back, readiness returns, the pool and the LISTEN connection reconnect, and every task
that was acknowledged with 201, before or after, is delivered. No process restart.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import FAST_RECOVERY_ENV, drop_workly_env, serve_args
from tests.support.postgres import Cluster
from tests.support.receiver import running_receiver
from tests.support.servers import AUTH, TEST_SECRET, free_port, wait_ready, workly_subprocess

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    try:
        own = Cluster()
    except LookupError:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip("no PostgreSQL server binaries to start a cluster of the test's own")
    own.start()
    yield own
    own.remove()


async def until_status(client: httpx.AsyncClient, path: str, status: int, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while True:
            try:
                if (await client.get(path)).status_code == status:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)


async def enqueue(client: httpx.AsyncClient, url: str, count: int) -> set[str]:
    tasks = [{"url": url} for _ in range(count)]
    response = await client.post("/v1/queues/restart/tasks/batch", json={"tasks": tasks})
    assert response.status_code == 201, response.text
    return {task["id"] for task in response.json()["tasks"]}


async def test_the_service_survives_a_database_restart(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    env = {
        "WORKLY_DATABASE_URL": cluster.url,
        **FAST_RECOVERY_ENV,
        "WORKLY_READY_STALL_SECONDS": "5",
    }
    port, log = free_port(), tmp_path / "workly.log"
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.delay("/before", 0.5)  # deliveries are in flight when the database goes
        with workly_subprocess(serve_args(port), env, port, log) as server:
            await asyncio.to_thread(wait_ready, server, port, log)
            async with httpx.AsyncClient(
                headers=AUTH, base_url=f"http://127.0.0.1:{port}", timeout=10
            ) as client:
                await client.put("/v1/queues/restart", json={"max_concurrency": 50, "timeout": 2})
                acknowledged = await enqueue(client, receiver.url("/before"), 200)
                async with asyncio.timeout(10):
                    while receiver.in_flight < 50:
                        await asyncio.sleep(0.02)

                await asyncio.to_thread(cluster.stop)
                await until_status(client, "/health/ready", 503)
                during = await client.post("/v1/queues/restart/tasks", json={"url": receiver.url("/x")})
                assert during.status_code == 503, during.text
                assert during.headers["content-type"] == "application/problem+json"

                await asyncio.to_thread(cluster.start)
                await until_status(client, "/health/ready", 200)
                acknowledged |= await enqueue(client, receiver.url("/after"), 200)
                async with asyncio.timeout(60):
                    while {r.headers["webhook-id"] for r in receiver.requests} < acknowledged:
                        await asyncio.sleep(0.1)
            assert server.poll() is None, "the server kept running through the restart"
    assert {r.headers["webhook-id"] for r in receiver.requests} == acknowledged
