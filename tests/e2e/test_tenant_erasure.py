"""kill -9 the real server in the middle of a tenant's erasure, restart it: the erasure goes on
from where it stood and ends, leaving nothing of the tenant but the audit log's entries, and
nothing of the other tenant is touched (docs/retention.md)."""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import FAST_RECOVERY_ENV, dev_args, drop_workly_env, serve_args
from tests.support.db_scan import where_found
from tests.support.servers import api_client, free_port, wait_ready, workly_subprocess
from workly.ids import new_id, new_task_id
from workly.models import NewTask
from workly.storage.factory import open_storage
from workly.webhooks import EndpointSpec, NewEvent

pytestmark = pytest.mark.e2e
GONE, KEPT = "erased-by-kill-test-41c9", "kept-by-kill-test-7d20"
MARKER = b"ERASE-KILL-TEST-PAYLOAD-3b88"
PLAIN, EVENTS = 24_000, 2_000  # tens of chunks of 1,000: a kill lands mid-way


@pytest.fixture(params=["dev", pytest.param("serve", marks=pytest.mark.postgres)])
def server(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[str], dict[str, str], int, str]:
    """The CLI arguments, environment, port and database URL of a server started twice."""
    env = {**FAST_RECOVERY_ENV, "WORKLY_LOG_LEVEL": "warning"}
    port = free_port()
    if request.param == "serve":
        url: str = request.getfixturevalue("pg_fresh_db")
        env["WORKLY_DATABASE_URL"] = url
        args = serve_args(port)
    else:
        url = f"sqlite:///{tmp_path / 'workly.db'}"
        args = dev_args(tmp_path / "workly.db", port)
    drop_workly_env(monkeypatch)
    return args, env, port, url


async def fill(url: str) -> None:
    """Both tenants' tasks and events, stored before the server starts; nothing due for a day,
    so the server sends none of it."""
    storage = await open_storage(url)
    try:
        await storage.database.migrate()
        now = datetime.now(UTC)
        later = now + timedelta(days=1)
        for tenant, plain, events in ((GONE, PLAIN, EVENTS), (KEPT, 100, 50)):
            body = MARKER if tenant == GONE else b"kept"
            for start in range(0, plain, 1000):
                batch = [NewTask(new_task_id(), "plain", "http://127.0.0.1:9/", body=body, tenant=tenant,
                                 run_at=later) for _ in range(start, min(plain, start + 1000))]  # fmt: skip
                await storage.tasks.enqueue(batch, now)
            spec = EndpointSpec(url="http://127.0.0.1:9/", tenant=tenant)
            await storage.webhooks.create_endpoint(new_id("ep"), spec, now)
            for _ in range(events):
                event = NewEvent(new_id("evt"), "a.b", body, "application/json", tenant=tenant, run_at=later)
                await storage.webhooks.publish(event, now, new_task_id)
    finally:
        await storage.close()


async def operation(base_url: str, path: str) -> dict[str, Any]:
    async with api_client(base_url) as client:
        response = await client.get(path)
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found


async def test_an_erasure_killed_mid_way_goes_on_after_a_restart(
    server: tuple[list[str], dict[str, str], int, str], tmp_path: Path
) -> None:
    args, env, port, url = server
    base_url = f"http://127.0.0.1:{port}"
    log = tmp_path / "workly.log"
    await fill(url)
    with workly_subprocess(args, env, port, log) as first:
        await asyncio.to_thread(wait_ready, first, port, log)
        async with api_client(base_url) as client:
            response = await client.delete(f"/v1/tenants/{GONE}")
        assert response.status_code == 202, response.text
        location = response.headers["location"]
        async with asyncio.timeout(60):
            while (progress := await operation(base_url, location))["changed"] < 2000:
                assert progress["state"] == "running", progress
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert PLAIN + EVENTS * 2 > progress["changed"] >= 2000

    with workly_subprocess(args, env, port, log) as second:
        await asyncio.to_thread(wait_ready, second, port, log)
        stopped = await operation(base_url, location)
        assert stopped["state"] == "running" and stopped["changed"] >= progress["changed"]
        async with asyncio.timeout(90):  # its lease (15 s) runs out first; then it resumes
            while (done := await operation(base_url, location))["state"] == "running":
                await asyncio.sleep(0.2)
        assert done["state"] == "succeeded", done
        assert done["changed"] == done["matched"] == PLAIN + EVENTS * 2  # each row once
        async with api_client(base_url) as client:
            kept = (await client.get("/v1/queues/plain")).json()["counts"]["ready"]
            assert kept == 100
            assert (await client.get(f"/v1/tenants/{KEPT}")).status_code == 200
            assert (await client.get(f"/v1/tenants/{GONE}")).status_code == 404
    # Only the audit log names it (who asked for its erasure), and nothing holds its payloads.
    assert set(await where_found(url, GONE.encode())) <= {"audit_log.target", "audit_log.tenant"}
    assert await where_found(url, MARKER) == []
    assert len(await where_found(url, KEPT.encode())) >= 100 + 50
