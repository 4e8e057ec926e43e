"""The SSRF guard end to end, with loopback targets only: `workly serve` refuses every
spelling of a loopback address unless it is allow-listed, and no server follows a
redirect. The receivers listen on 127.0.0.1; the assertion is that they hear nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.e2e.conftest import dev_args, drop_workly_env, serve_args
from tests.support.receiver import running_receiver
from tests.support.servers import (
    TEST_SECRET,
    TEST_SERVER_ENV,
    TEST_TOKEN,
    api_client,
    free_port,
    workly_process,
)

pytestmark = pytest.mark.e2e


def loopback_spellings(port: int) -> dict[str, str]:
    return {
        "plain": f"http://127.0.0.1:{port}/plain",
        "short": f"http://127.1:{port}/short",
        "hex": f"http://0x7f000001:{port}/hex",
        "decimal": f"http://2130706433:{port}/decimal",
        "mapped": f"http://[::ffff:127.0.0.1]:{port}/mapped",
        "ipv6": f"http://[::1]:{port}/ipv6",
        "name": f"http://localhost:{port}/name",
    }


@pytest.mark.postgres
async def test_serve_refuses_every_loopback_spelling(
    pg_fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "WORKLY_DATABASE_URL": pg_fresh_db,
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        "WORKLY_API_TOKENS": TEST_TOKEN,
    }
    drop_workly_env(monkeypatch)  # no WORKLY_OUTBOUND_ALLOW: the production default
    port = free_port()
    async with running_receiver(TEST_SECRET) as receiver:
        targets = loopback_spellings(int(receiver.base_url.rsplit(":", 1)[1]))
        with workly_process(serve_args(port), env, port, tmp_path / "serve.log") as url:
            async with api_client(url) as client:
                ids = {}
                for name, target in targets.items():
                    response = await client.post("/v1/queues/ssrf/tasks", json={"url": target})
                    assert response.status_code == 201, (name, response.text)
                    ids[name] = response.json()["id"]
                tasks = {}
                async with asyncio.timeout(20):
                    while len(tasks) < len(ids):
                        for name, task_id in ids.items():
                            task = (await client.get(f"/v1/tasks/{task_id}")).json()
                            if task["status"] == "failed":
                                tasks[name] = task
                        await asyncio.sleep(0.1)
    assert receiver.requests == []
    for name, task in tasks.items():
        assert task["attempts"] == 1, name  # refused for good: a retry would meet the same policy
        assert task["last_error"].startswith("blocked: "), (name, task["last_error"])
        assert "WORKLY_OUTBOUND_ALLOW" in task["last_error"]
        assert "127.0.0.1" not in task["last_error"]  # the API does not map the network ...
    assert (
        "blocked: localhost (127.0.0.1) is loopback" in (tmp_path / "serve.log").read_text()
    )  # ... the log does


async def test_a_redirect_to_loopback_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`workly dev` may deliver to loopback; it still never follows the 302 to /inside."""
    drop_workly_env(monkeypatch)
    port = free_port()
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV, "WORKLY_POLL_INTERVAL": "0.2"}
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.redirect("/outside", receiver.url("/inside"))
        with workly_process(dev_args(tmp_path / "w.db", port), env, port, tmp_path / "dev.log") as url:
            async with api_client(url) as client:
                task = {"url": receiver.url("/outside"), "max_attempts": 1}
                task_id = (await client.post("/v1/queues/redirect/tasks", json=task)).json()["id"]
                async with asyncio.timeout(20):
                    while (await client.get(f"/v1/tasks/{task_id}")).json()["status"] != "failed":
                        await asyncio.sleep(0.1)
                [attempt] = (await client.get(f"/v1/tasks/{task_id}/attempts")).json()["attempts"]
    assert attempt["status_code"] == 302
    assert len(receiver.at("/outside")) == 1
    assert receiver.at("/inside") == []
