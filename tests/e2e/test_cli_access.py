"""`workly tenant …`, `workly key …`, `workly audit` and `endpoint-update`, `endpoint-recover`,
`endpoint-rotate`, run in-process (tests/e2e/cli.py) against one `workly dev` app with API
tokens for the module; bad input is run with no server at all."""

from __future__ import annotations

import json
import uuid

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
    """The module shares one server: each test names its own objects."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_a_tenant_is_created_changed_shown_and_listed(e2e: E2E) -> None:
    tenant = unique("acme")
    options = ["--name", "Acme Inc.", "--metadata", "plan=pro", "--max-endpoints", "2", "--json"]
    created = ok(await workly(e2e, "tenant", "create", tenant, *options)).json()
    assert (
        created["name"] == "Acme Inc."
        and created["metadata"] == {"plan": "pro"}
        and created["max_endpoints"] == 2
    )
    ok(await workly(e2e, "tenant", "update", tenant, "--retention", "86400"))
    shown = ok(await workly(e2e, "tenant", "show", tenant)).out
    assert "Acme Inc." in shown and "86400s" in shown and "plan=pro" in shown and "0 of at most 2" in shown
    listed = ok(await workly(e2e, "tenant", "list", "--limit", "500")).out
    assert tenant in listed


async def test_a_key_is_printed_once_works_and_is_revoked(e2e: E2E) -> None:
    name = unique("support")
    made = ok(await workly(e2e, "key", "create", name, "--role", "reader")).out
    key = made.splitlines()[0]
    assert key.startswith("wk_") and "cannot show it again" in made
    listed = ok(await workly(e2e, "key", "list", "--limit", "500", "--json")).json()["keys"]
    [mine] = [k for k in listed if k["name"] == name]
    assert mine["role"] == "reader" and key not in json.dumps(listed)
    as_reader = await workly(e2e, "queues", env={"WORKLY_TOKEN": key})
    assert as_reader.code == 0, as_reader
    refused = await workly(e2e, "pause", "default", env={"WORKLY_TOKEN": key})
    assert refused.code == 1 and "403" in refused.err and "reader" in refused.err
    assert ok(await workly(e2e, "key", "revoke", mine["id"])).out.strip() == f"revoked {mine['id']}"
    after = await workly(e2e, "queues", env={"WORKLY_TOKEN": key})
    assert after.code == 1 and "401" in after.err
    entries = ok(await workly(e2e, "audit", "--action", "key.revoke", "--json")).json()["entries"]
    assert any(e["target"] == mine["id"] for e in entries)
    table = ok(await workly(e2e, "audit", "--actor", mine["id"])).out
    assert "queue.pause" in table and "denied" in table


async def test_an_endpoint_is_updated_recovered_and_its_secret_rotated(e2e: E2E) -> None:
    url = e2e.receiver.url("/rotating")
    created = ok(await workly(e2e, "endpoint-create", url, "--events", "*", "--json")).json()
    endpoint_id = created["id"]
    changes = ["--description", "billing", "--max-attempts", "3", "--json"]
    updated = ok(await workly(e2e, "endpoint-update", endpoint_id, *changes)).json()
    assert updated["description"] == "billing" and updated["max_attempts"] == 3
    recovered = ok(await workly(e2e, "endpoint-recover", endpoint_id, "--since", "2020-01-01T00:00:00Z")).out
    assert recovered.strip() == "re-enqueued 0 deliveries"
    old = (await e2e.client.get(f"/v1/endpoints/{endpoint_id}/secret")).json()["signing_secret"]
    rotated = ok(await workly(e2e, "endpoint-rotate", endpoint_id, "--json")).json()
    new = rotated["signing_secret"]
    assert new.startswith("whsec_") and new != old and old not in json.dumps(rotated)
    stored = (await e2e.client.get(f"/v1/endpoints/{endpoint_id}/secret")).json()["signing_secret"]
    assert stored == f"{new} {old}"
    published = await e2e.client.post("/v1/events", json={"type": "invoice.paid", "payload": {"n": 1}})
    assert published.status_code == 201, published.text
    got = await e2e.receiver.wait_for("/rotating", 1)
    assert _verify(new, got[0].body, got[0].headers) and _verify(old, got[0].body, got[0].headers)
    ok(await workly(e2e, "endpoint-rotate", endpoint_id, "--drop-old"))
    assert (
        len((await e2e.client.get(f"/v1/endpoints/{endpoint_id}/secret")).json()["signing_secret"].split())
        == 1
    )


@pytest.mark.parametrize(
    "args",
    [
        ("tenant", "update", "acme"),
        ("tenant", "create", "acme", "--metadata", "no-equals"),
        ("key", "create", "x", "--role", "owner"),
        ("key", "create", "x", "--expires-at", "tomorrow"),
        ("audit", "--since", "yesterday"),
        ("endpoint-update", "ep_1"),
        ("endpoint-recover", "ep_1", "--since", "last week"),
    ],
)
def test_bad_input_is_refused_before_anything_is_sent(args: tuple[str, ...]) -> None:
    run, sent = offline(*args)
    assert run.code == 2 and run.err.startswith("workly: "), run
    assert sent == []


async def test_an_ed25519_endpoint_is_rotated_to_a_new_key_pair_and_only_its_public_key_is_shown(
    e2e: E2E,
) -> None:
    url = e2e.receiver.url("/rotating-v1a")
    created = ok(await workly(e2e, "endpoint-create", url, "--events", "*", "--ed25519", "--json")).json()
    old = (await e2e.client.get(f"/v1/endpoints/{created['id']}/secret")).json()["signing_secret"]
    shown = ok(await workly(e2e, "endpoint-rotate", created["id"])).out
    assert shown.startswith("new public key: whpk_") and "whsk_" not in shown
    stored = (await e2e.client.get(f"/v1/endpoints/{created['id']}/secret")).json()["signing_secret"].split()
    assert [s[:5] for s in stored] == ["whsk_", "whsk_"] and stored[1] == old
    keys = (await e2e.client.get(f"/v1/endpoints/{created['id']}/public-key")).json()["public_keys"]
    assert shown.split()[-1] == keys[0] and len(keys) == 2
