"""`workly event-type …`, `endpoint-replay`, `endpoint-test` and the routing options of
`endpoint-create`, `endpoint-update` and `publish`, run in-process (tests/e2e/cli.py) against
one `workly dev` app for the module; bad input is run with no server at all."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.cli import InProcessServer, Run, offline, workly
from tests.e2e.conftest import E2E
from tests.support.receiver import _verify

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


def ok(run: Run) -> Run:
    assert run.code == 0 and not run.err, run
    return run


def unique(prefix: str) -> str:
    """The module shares one server: each test names its own types and endpoints."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


async def test_an_event_type_is_declared_shown_listed_changed_and_removed(e2e: E2E, tmp_path: Path) -> None:
    name = f"{unique('invoice')}.paid"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["amount"]}))
    made = ok(await workly(e2e, "event-type", "put", name, "--description", "paid", "--schema", f"@{schema}",
                           "--example", '{"amount": 5}', "--json")).json()  # fmt: skip
    assert made["schema"] == {"type": "object", "required": ["amount"]} and made["examples"] == [
        {"amount": 5}
    ]
    shown = ok(await workly(e2e, "event-type", "show", name)).out
    assert name in shown and '{"amount": 5}' in shown and "required" in shown
    assert name in ok(await workly(e2e, "event-type", "list", "--limit", "500")).out
    ok(await workly(e2e, "event-type", "update", name, "--deprecated"))
    assert name not in ok(await workly(e2e, "event-type", "list", "--limit", "500")).out
    assert name in ok(await workly(e2e, "event-type", "list", "--all", "--limit", "500")).out
    refused = await workly(e2e, "publish", name, "--data", '{"total": 5}')
    assert refused.code == 1 and "422" in refused.err and '"amount" is a required property' in refused.err
    assert (
        ok(await workly(e2e, "event-type", "delete", name)).out.strip()
        == f"{name} removed from the catalogue"
    )
    gone = await workly(e2e, "event-type", "show", name)
    assert gone.code == 1 and "404" in gone.err


async def test_a_bad_schema_is_refused_with_where(e2e: E2E) -> None:
    run = await workly(e2e, "event-type", "put", f"{unique('x')}.y", "--example", '"a"', "--schema",
                       '{"type": "integer"}')  # fmt: skip
    assert run.code == 1 and "422" in run.err and "/examples/0" in run.err, run


async def test_an_endpoint_is_tested_filtered_enveloped_and_replayed(e2e: E2E) -> None:
    path = f"/{unique('cli')}"
    event_type = f"{unique('order')}.placed"
    since = datetime.now(UTC).isoformat()
    ok(await workly(e2e, "publish", event_type, "--data", '{"n": 1}', "--label", "region=eu"))
    ok(await workly(e2e, "publish", event_type, "--data", '{"n": 2}', "--label", "region=us"))
    options = ["--events", event_type, "--filter", '{"labels.region": "eu"}', "--envelope", "--json"]
    created = ok(await workly(e2e, "endpoint-create", e2e.receiver.url(path), *options)).json()
    assert created["filter"] == {"labels.region": "eu"} and created["payload_format"] == "envelope"
    tested = ok(await workly(e2e, "endpoint-test", created["id"], "--json")).json()
    assert tested["test"] is True
    [test] = await e2e.receiver.wait_for(path, 1)
    assert json.loads(test.body)["data"] == {"type": "workly.test"}
    assert _verify(created["signing_secret"], test.body, test.headers)
    started = ok(await workly(e2e, "endpoint-replay", created["id"], "--since", since, "--json")).json()
    assert started["action"] == "replay"
    _, replayed = await e2e.receiver.wait_for(path, 2)
    assert json.loads(replayed.body)["data"] == {"n": 1}  # the eu one only
    async with asyncio.timeout(10):
        while ok(await workly(e2e, "operation", started["id"], "--json")).json()["state"] == "running":
            await asyncio.sleep(0.05)  # the operation's answer, polled as a user would
    again = ok(await workly(e2e, "endpoint-replay", created["id"], "--since", "1h", "--json")).json()
    assert again["filter"]["created_after"] < datetime.now(UTC).isoformat()  # an hour back, as a time
    recovered = ok(await workly(e2e, "endpoint-recover", created["id"], "--since", "2h")).out
    assert recovered.strip() == "re-enqueued 0 deliveries"
    updated = ok(await workly(e2e, "endpoint-update", created["id"], "--filter", "null", "--payload-format",
                              "raw", "--json")).json()  # fmt: skip
    assert updated["filter"] is None and updated["payload_format"] == "raw"
    detail = ok(await workly(e2e, "endpoint", created["id"])).out
    assert "raw" in detail


@pytest.mark.parametrize(
    "args",
    [
        ("event-type", "put", "a.b", "--schema", "{not json"),
        ("event-type", "update", "a.b"),
        ("event-type", "put", "a.b", "--example", "@/nonexistent/file.json"),
        ("endpoint-replay", "ep_1", "--since", "last week"),
        ("publish", "a.b", "--data", "1", "--label", "no-equals"),
        ("endpoint-create", "http://127.0.0.1:9/", "--events", "*", "--filter", "{bad"),
    ],
)
def test_bad_input_is_refused_before_anything_is_sent(args: tuple[str, ...]) -> None:
    run, sent = offline(*args)
    assert run.code == 2 and run.err.startswith("workly: "), run
    assert sent == []
