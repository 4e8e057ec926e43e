"""DELETE /v1/tenants/{tenant} (erasure, an operation) and GET /v1/tenants/{tenant}/export
(JSON Lines), on both backends (docs/retention.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from tests.api.conftest import HOOK, assert_problem
from tests.support.servers import TEST_SECRET, in_process
from workly.clock import SystemClock
from workly.config import Settings
from workly.lifecycle import tenant_hash
from workly.models import AttemptResult
from workly.service import Service
from workly.service.operation_runner import OperationRunner


@pytest.fixture
async def world(database_url: str) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    async with in_process(settings) as (service, http):
        yield service, http


async def fail_one(service: Service) -> None:
    """Claim the one due delivery and record its attempt failed (no dispatcher runs here)."""
    storage = service.storage
    [claimed] = (await storage.dispatch.claim_tasks(10, datetime.now(UTC), "lease", 30.0)).tasks
    now = datetime.now(UTC)
    result = AttemptResult(task_seq=claimed.seq, lease_token=claimed.lease_token, attempt=claimed.attempt,
                           started_at=now, finished_at=now, status_code=500, error="HTTP 500", response=b"no",
                           outcome="failed", breaker=claimed.breaker, endpoint_id=claimed.endpoint_id,
                           task_id=claimed.id)  # fmt: skip
    await storage.dispatch.record_results([result], now)


async def tenant_with_data(http: httpx.AsyncClient, tenant: str) -> dict[str, str]:
    endpoint = (await http.post("/v1/endpoints", json={"url": HOOK, "tenant": tenant})).json()
    event = (
        await http.post("/v1/events", json={"type": "a.b", "tenant": tenant, "payload": {"v": tenant}})
    ).json()
    return {"endpoint": endpoint["id"], "event": event["id"], "task": event["deliveries"][0]["task_id"]}


async def test_an_erasure_is_an_operation_that_leaves_the_tenant_unknown(
    world: tuple[Service, httpx.AsyncClient],
) -> None:
    service, http = world
    ids = await tenant_with_data(http, "acme")
    kept = await tenant_with_data(http, "other")
    response = await http.delete("/v1/tenants/acme")
    assert response.status_code == 202, response.text
    operation = response.json()
    assert (operation["action"], operation["state"], operation["filter"]) == (
        "erase",
        "running",
        {"tenant": "acme"},
    )
    assert response.headers["location"] == f"/v1/operations/{operation['id']}"
    assert operation["matched"] == 2  # its event and its delivery

    await OperationRunner(service.storage.operations, SystemClock(), lambda: None).run_pending()
    done = (await http.get(response.headers["location"])).json()
    assert (done["state"], done["filter"]) == ("succeeded", {"tenant": tenant_hash("acme")})
    assert done["changed"] == 2 and done["finished_at"] is not None
    assert_problem(await http.get("/v1/tenants/acme"), 404)
    assert_problem(await http.get(f"/v1/endpoints/{ids['endpoint']}"), 404)
    assert_problem(await http.get(f"/v1/events/{ids['event']}"), 404)
    assert_problem(await http.get(f"/v1/tasks/{ids['task']}"), 404)
    assert_problem(await http.delete("/v1/tenants/acme"), 404)  # nothing names it any more
    for path in (f"/v1/endpoints/{kept['endpoint']}", f"/v1/events/{kept['event']}", "/v1/tenants/other"):
        assert (await http.get(path)).status_code == 200


async def test_an_erasure_asked_twice_is_one_operation(world: tuple[Service, httpx.AsyncClient]) -> None:
    _, http = world
    await tenant_with_data(http, "acme")
    first = (await http.delete("/v1/tenants/acme")).json()
    second = await http.delete("/v1/tenants/acme")
    assert second.status_code == 202 and second.json()["id"] == first["id"]


@pytest.mark.parametrize("tenant", ["nobody", "a%01b"])
async def test_an_unknown_tenant_is_neither_erased_nor_exported(
    world: tuple[Service, httpx.AsyncClient], tenant: str
) -> None:
    _, http = world
    assert_problem(await http.delete(f"/v1/tenants/{tenant}"), 404)
    assert_problem(await http.get(f"/v1/tenants/{tenant}/export"), 404)
    assert (await http.get("/v1/operations")).json()["operations"] == []


async def test_an_export_is_json_lines_of_everything_without_secrets(
    world: tuple[Service, httpx.AsyncClient],
) -> None:
    _, http = world
    ids = await tenant_with_data(http, "acme")
    await http.post("/v1/queues/q/tasks", json={"url": HOOK, "tenant": "acme", "body": "plain"})
    await tenant_with_data(http, "other")
    response = await http.get("/v1/tenants/acme/export")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/jsonl"
    assert "attachment" in response.headers["content-disposition"]
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["kind"] for line in lines] == ["endpoint", "event", "task", "task"]
    assert lines[0]["id"] == ids["endpoint"] and lines[1]["id"] == ids["event"]
    assert lines[1]["payload"] == {"v": "acme"}
    assert {line["tenant"] for line in lines if line["kind"] != "task"} == {"acme"}
    secret = (await http.get(f"/v1/endpoints/{ids['endpoint']}/secret")).json()["signing_secret"]
    assert secret.removeprefix("whsec_") not in response.text
    assert "other" not in response.text


async def test_an_export_names_the_task_of_each_attempt(world: tuple[Service, httpx.AsyncClient]) -> None:
    service, http = world
    ids = await tenant_with_data(http, "acme")
    await fail_one(service)
    lines = [json.loads(line) for line in (await http.get("/v1/tenants/acme/export")).text.splitlines()]
    attempts = [line for line in lines if line["kind"] == "attempt"]
    assert [(a["task_id"], a["attempt"], a["status_code"]) for a in attempts] == [(ids["task"], 1, 500)]


@pytest.mark.parametrize("value", [True, "60", 1e3, -1, 1.5, 10**20])
async def test_a_retention_is_whole_seconds_and_nothing_else(
    world: tuple[Service, httpx.AsyncClient], value: object
) -> None:
    _, http = world
    await http.put("/v1/tenants/acme", json={})
    await http.put("/v1/queues/q", json={})
    endpoint = (await http.post("/v1/endpoints", json={"url": HOOK})).json()
    paths = ["/v1/tenants/acme", "/v1/queues/q", f"/v1/endpoints/{endpoint['id']}"]
    for method, path in [("PATCH", path) for path in paths] + [("PUT", "/v1/tenants/acme")]:
        body = assert_problem(await http.request(method, path, json={"retention": value}), 422)
        assert "retention" in json.dumps(body)
    assert (await http.get("/v1/tenants/acme")).json()["retention"] is None
    assert (await http.get("/v1/queues/q")).json()["retention"] is None
