"""`workly tenant-export`, `tenant-erase`, `task-delete` and `event-delete`, run in-process
(tests/e2e/cli.py) against one `workly dev` app for the module (docs/retention.md)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from tests.e2e.cli import InProcessServer, Run, workly
from tests.e2e.conftest import E2E

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


def ok(run: Run) -> Run:
    assert run.code == 0, run
    return run


async def tenant_with_an_event(e2e: E2E) -> tuple[str, str]:
    tenant = f"cli-{uuid.uuid4().hex[:8]}"
    created = await e2e.client.post("/v1/endpoints", json={"url": e2e.receiver.url("/t"), "tenant": tenant})
    assert created.status_code == 201, created.text
    event = await e2e.client.post(
        "/v1/events", json={"type": "a.b", "tenant": tenant, "payload": {"t": tenant}}
    )
    assert event.status_code == 201, event.text
    return tenant, event.json()["id"]


async def test_a_tenant_is_exported_to_a_file_then_erased(e2e: E2E, tmp_path: Path) -> None:
    tenant, event_id = await tenant_with_an_event(e2e)
    target = tmp_path / "export.jsonl"
    run = ok(await workly(e2e, "tenant-export", tenant, "-o", str(target)))
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["kind"] for line in lines][:2] == ["endpoint", "event"]
    assert lines[1]["id"] == event_id and f"{len(lines)} lines written" in run.err
    assert not (tmp_path / "export.jsonl.partial").exists()
    to_stdout = ok(await workly(e2e, "tenant-export", tenant))
    assert [json.loads(line)["id"] for line in to_stdout.out.splitlines()[:2]] == [lines[0]["id"], event_id]

    refused = await workly(e2e, "tenant-erase", tenant)
    assert refused.code == 2 and "--yes" in refused.err
    assert (await e2e.client.get(f"/v1/tenants/{tenant}")).status_code == 200
    erased = ok(await workly(e2e, "tenant-erase", tenant, "--yes", "--json")).json()
    assert erased["action"] == "erase" and erased["state"] == "succeeded"
    assert erased["filter"]["tenant"].startswith("sha256:")
    assert (await e2e.client.get(f"/v1/tenants/{tenant}")).status_code == 404
    gone = await workly(e2e, "tenant-export", tenant, "-o", str(tmp_path / "gone.jsonl"))
    assert gone.code == 1 and "404" in gone.err and not (tmp_path / "gone.jsonl").exists()


async def test_an_event_and_a_task_are_deleted(e2e: E2E) -> None:
    _, event_id = await tenant_with_an_event(e2e)
    refused = await workly(e2e, "event-delete", event_id)
    assert refused.code == 2 and "--yes" in refused.err
    async with asyncio.timeout(10):  # its delivery is not in flight any more
        while (await workly(e2e, "event-delete", event_id, "--yes")).code != 0:
            await asyncio.sleep(0.05)
    assert (await e2e.client.get(f"/v1/events/{event_id}")).status_code == 404
    task = (await e2e.client.post("/v1/queues/cli-delete/tasks", json={"url": e2e.receiver.url("/x")})).json()
    async with asyncio.timeout(10):
        while (await workly(e2e, "task-delete", task["id"], "--yes")).code != 0:
            await asyncio.sleep(0.05)
    assert (await e2e.client.get(f"/v1/tasks/{task['id']}")).status_code == 404
    missing = await workly(e2e, "task-delete", task["id"], "--yes")
    assert missing.code == 1 and "404" in missing.err


@pytest.mark.parametrize(("given", "stored"), [("1d", 86400), ("forever", 0), ("none", None)])
async def test_a_queue_keeps_its_tasks_as_long_as_retention_says(
    e2e: E2E, given: str, stored: int | None
) -> None:
    queue = f"kept-{uuid.uuid4().hex[:8]}"
    shown = ok(await workly(e2e, "queue-update", queue, "--retention", given, "--json")).json()
    assert shown["retention"] == stored
    bad = await workly(e2e, "queue-update", queue, "--retention", "soon")
    assert bad.code == 2 and "duration" in bad.err
