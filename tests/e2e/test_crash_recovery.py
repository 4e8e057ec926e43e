"""kill -9 the real server in the middle of a 5,000-task run, restart it: nothing is lost.

Every task is delivered at least once, and a task delivered twice (its first attempt
was cut off by the kill, or its result never recorded) carries the same webhook-id both
times. The lease is short here (timeout 1 s + margin 3 s) so the reaper of the restarted
process brings the stranded tasks back within seconds.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FAST_RECOVERY_ENV, dev_args, drop_workly_env, serve_args
from tests.support.receiver import running_receiver
from tests.support.servers import (
    TEST_SECRET,
    api_client,
    free_port,
    wait_ready,
    workly_subprocess,
)

pytestmark = pytest.mark.e2e
TASKS = 5000


async def enqueue_all(base_url: str, receiver_url: str) -> list[str]:
    async with api_client(base_url, timeout=30) as client:
        config = {"max_concurrency": 100, "timeout": 1, "min_backoff": 0.05, "max_backoff": 0.2}
        assert (await client.put("/v1/queues/crash", json=config)).status_code in (200, 201)
        ids: list[str] = []
        for start in range(0, TASKS, 1000):
            batch: list[dict[str, Any]] = [
                {"url": f"{receiver_url}/t/{n}", "body": {"n": n}} for n in range(start, start + 1000)
            ]
            response = await client.post("/v1/queues/crash/tasks/batch", json={"tasks": batch})
            assert response.status_code == 201, response.text
            ids.extend(task["id"] for task in response.json()["tasks"])
        return ids


@pytest.fixture(params=["dev", pytest.param("serve", marks=pytest.mark.postgres)])
def server_command(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], dict[str, str], int]:
    """The CLI arguments, environment and port of a server the test starts (twice)."""
    env = {
        **FAST_RECOVERY_ENV,
        "WORKLY_LOG_LEVEL": "warning",
    }
    port = free_port()
    if request.param == "serve":
        env["WORKLY_DATABASE_URL"] = request.getfixturevalue("pg_fresh_db")
        args = serve_args(port)
    else:
        args = dev_args(tmp_path / "workly.db", port)
    drop_workly_env(monkeypatch)
    return args, env, port


async def test_kill_9_mid_run_then_restart_loses_nothing(
    server_command: tuple[list[str], dict[str, str], int], tmp_path: Path
) -> None:
    args, env, port = server_command
    log = tmp_path / "workly.log"
    async with running_receiver(TEST_SECRET) as receiver:
        with workly_subprocess(args, env, port, log) as first:
            await asyncio.to_thread(wait_ready, first, port, log)
            ids = await enqueue_all(f"http://127.0.0.1:{port}", receiver.base_url)
            async with asyncio.timeout(60):
                while len(receiver.requests) < TASKS // 10:
                    await asyncio.sleep(0.01)
            first.send_signal(signal.SIGKILL)
            first.wait()
        delivered_before = {r.headers["webhook-id"] for r in receiver.requests}
        assert len(delivered_before) < TASKS, "the kill came too late to test anything"
        with workly_subprocess(args, env, port, log) as second:
            await asyncio.to_thread(wait_ready, second, port, log)
            async with asyncio.timeout(90):
                while len({r.headers["webhook-id"] for r in receiver.requests}) < TASKS:
                    await asyncio.sleep(0.05)
    delivered = [r.headers["webhook-id"] for r in receiver.requests]
    assert set(delivered) == set(ids)  # every task at least once, nothing unknown
    by_id = {r.headers["webhook-id"]: r.body for r in receiver.requests}
    for request_ in receiver.requests:  # a duplicate is the same task: same id, same body
        assert by_id[request_.headers["webhook-id"]] == request_.body
    assert all(r.verified for r in receiver.requests)
