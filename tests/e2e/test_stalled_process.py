"""A process stopped (SIGSTOP) past its lease: another process takes the task over, and when
the stopped one resumes (SIGCONT), its late result is refused and kept as a stale attempt."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import FAST_RECOVERY_ENV, drop_workly_env, serve_args
from tests.support.receiver import running_receiver
from tests.support.servers import (
    AUTH,
    TEST_SECRET,
    api_client,
    free_port,
    wait_ready,
    workly_subprocess,
)

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.fixture
def database_url(pg_fresh_db: str) -> str:
    return pg_fresh_db


async def status_of(client: httpx.AsyncClient, task_id: str) -> str:
    status: str = (await client.get(f"/v1/tasks/{task_id}")).json()["status"]
    return status


async def attempts_of(client: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
    attempts: list[dict[str, Any]] = (await client.get(f"/v1/tasks/{task_id}/attempts")).json()["attempts"]
    return attempts


async def test_a_stalled_processs_late_result_is_refused(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    env = {
        "WORKLY_DATABASE_URL": database_url,
        **FAST_RECOVERY_ENV,
    }
    port_a, port_b = free_port(), free_port()
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.delay("/slow", 1)
        with workly_subprocess(serve_args(port_a), env, port_a, tmp_path / "a.log") as a:
            await asyncio.to_thread(wait_ready, a, port_a, tmp_path / "a.log")
            async with api_client(port_a) as client_a:
                await client_a.put("/v1/queues/stall", json={"timeout": 2})
                response = await client_a.post("/v1/queues/stall/tasks", json={"url": receiver.url("/slow")})
                task_id = response.json()["id"]
            async with asyncio.timeout(10):
                while receiver.in_flight < 1:
                    await asyncio.sleep(0.01)
            a.send_signal(signal.SIGSTOP)  # mid-delivery: its lease (2 s + 3 s) runs out
            try:
                with workly_subprocess(serve_args(port_b), env, port_b, tmp_path / "b.log") as b:
                    await asyncio.to_thread(wait_ready, b, port_b, tmp_path / "b.log")
                    async with httpx.AsyncClient(
                        headers=AUTH, base_url=f"http://127.0.0.1:{port_b}"
                    ) as client_b:
                        async with asyncio.timeout(30):
                            while (await client_b.get(f"/v1/tasks/{task_id}")).json()[
                                "status"
                            ] != "succeeded":
                                await asyncio.sleep(0.1)
                        a.send_signal(signal.SIGCONT)
                        async with asyncio.timeout(30):
                            while not any(x["stale"] for x in await attempts_of(client_b, task_id)):
                                await asyncio.sleep(0.1)
                        task = (await client_b.get(f"/v1/tasks/{task_id}")).json()
                        attempts = await attempts_of(client_b, task_id)
            finally:
                a.send_signal(signal.SIGCONT)
    assert (task["status"], task["last_status_code"]) == ("succeeded", 204)  # not overwritten
    assert [x["stale"] for x in attempts] == [False, False, True]
    assert "lease expired" in attempts[0]["error"]
    assert attempts[1]["status_code"] == 204
    assert attempts[2]["attempt"] == 1  # the stopped process's claim, refused
    assert len({r.headers["webhook-id"] for r in receiver.at("/slow")}) == 1
