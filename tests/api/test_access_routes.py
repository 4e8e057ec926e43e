"""Tenants, API keys, roles, tenant scope and the audit log through the API, on both
backends, with WORKLY_API_TOKENS set (the bootstrap admin) and keys made through the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.api.conftest import HOOK, assert_problem
from tests.support.clock import VirtualClock
from tests.support.servers import AUTH, TEST_SECRET, TEST_TOKEN, in_process
from workly.audit import AuditFilter
from workly.config import Settings
from workly.service import Service


@dataclass
class Admin:
    http: httpx.AsyncClient
    service: Service

    async def key(self, role: str, tenant: str | None = None, **fields: Any) -> str:
        body = {"name": f"{role}-{tenant}", "role": role, "tenant": tenant, **fields}
        response = await self.http.post("/v1/keys", json=body)
        assert response.status_code == 201, response.text
        key: str = response.json()["key"]
        return key

    async def endpoint(self, tenant: str | None, **fields: Any) -> dict[str, Any]:
        response = await self.http.post("/v1/endpoints", json={"url": HOOK, "tenant": tenant, **fields})
        assert response.status_code == 201, response.text
        endpoint: dict[str, Any] = response.json()
        return endpoint


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture
async def admin(database_url: str, clock: VirtualClock) -> AsyncIterator[Admin]:
    settings = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, api_tokens=TEST_TOKEN
    )
    async with in_process(settings, clock, headers=AUTH) as (service, http):
        yield Admin(http, service)


async def test_a_tenant_is_created_replaced_changed_and_listed(admin: Admin) -> None:
    body = {"name": "Acme Inc.", "metadata": {"plan": "pro"}, "retention": 86400, "max_endpoints": 5}
    created = await admin.http.put("/v1/tenants/acme", json=body)
    assert created.status_code == 201, created.text
    assert created.json() | {"created_at": None, "updated_at": None} == {
        "tenant": "acme", **body, "endpoints": 0, "created_at": None, "updated_at": None,
    }  # fmt: skip
    replaced = await admin.http.put("/v1/tenants/acme", json={"name": "Acme"})
    assert (
        replaced.status_code == 200
        and replaced.json()["metadata"] == {}
        and replaced.json()["max_endpoints"] is None
    )
    patched = await admin.http.patch("/v1/tenants/acme", json={"metadata": {"region": "eu"}})
    assert patched.status_code == 200 and patched.json()["name"] == "Acme"
    assert patched.json()["metadata"] == {"region": "eu"}
    await admin.endpoint("globex")  # made on first use, named by its id
    globex = (await admin.http.get("/v1/tenants/globex")).json()
    assert globex["name"] == "globex" and globex["endpoints"] == 1
    listed = (await admin.http.get("/v1/tenants", params={"limit": 1})).json()
    assert [t["tenant"] for t in listed["tenants"]] == ["globex"] and listed["next_cursor"]
    rest = (await admin.http.get("/v1/tenants", params={"cursor": listed["next_cursor"]})).json()
    assert [t["tenant"] for t in rest["tenants"]] == ["acme"]
    assert_problem(await admin.http.get("/v1/tenants/nobody"), 404, "not-found")
    assert_problem(await admin.http.patch("/v1/tenants/nobody", json={"name": "x"}), 404)


@pytest.mark.parametrize(
    "body",
    [
        {"metadata": {str(n): "v" for n in range(17)}},
        {"metadata": {"k": 1}},
        {"retention": -1},
        {"max_endpoints": "many"},
        {"unknown": 1},
        {"name": ""},
    ],
)
async def test_a_bad_tenant_is_refused_and_changes_nothing(admin: Admin, body: dict[str, Any]) -> None:
    assert_problem(await admin.http.put("/v1/tenants/acme", json=body), 422)
    assert_problem(await admin.http.get("/v1/tenants/acme"), 404)


async def test_max_endpoints_is_enforced(admin: Admin) -> None:
    await admin.http.put("/v1/tenants/acme", json={"max_endpoints": 1})
    await admin.endpoint("acme")
    refused = await admin.http.post("/v1/endpoints", json={"url": HOOK, "tenant": "acme"})
    assert_problem(refused, 409, "conflict")
    assert (await admin.http.get("/v1/tenants/acme")).json()["endpoints"] == 1


async def test_a_key_is_shown_once_and_works_until_revoked(admin: Admin) -> None:
    response = await admin.http.post("/v1/keys", json={"name": "ci", "role": "publisher"})
    assert response.status_code == 201
    created = response.json()
    key = created["key"]
    assert key.startswith("wk_") and len(key) >= 46 and created["id"].startswith("key_")
    assert created["last_used_at"] is None and created["revoked_at"] is None
    shown = (await admin.http.get(f"/v1/keys/{created['id']}")).json()
    assert "key" not in shown and shown["name"] == "ci" and shown["role"] == "publisher"
    listed = (await admin.http.get("/v1/keys")).json()["keys"]
    assert [k["id"] for k in listed] == [created["id"]] and key not in str(listed)
    enqueued = await admin.http.post("/v1/queues/q/tasks", json={"url": HOOK}, headers=bearer(key))
    assert enqueued.status_code == 201, enqueued.text
    used = (await admin.http.get(f"/v1/keys/{created['id']}")).json()
    assert used["last_used_at"] is not None
    assert (await admin.http.delete(f"/v1/keys/{created['id']}")).status_code == 204
    refused = await admin.http.post("/v1/queues/q/tasks", json={"url": HOOK}, headers=bearer(key))
    assert_problem(refused, 401, "unauthorized")
    assert (await admin.http.get(f"/v1/keys/{created['id']}")).json()["revoked_at"] is not None
    assert_problem(await admin.http.delete("/v1/keys/key_NOPE"), 404)


async def test_an_expired_key_is_refused(admin: Admin, clock: VirtualClock) -> None:
    expires = clock.now().timestamp() + 60
    from datetime import UTC, datetime

    key = await admin.key("admin", expires_at=datetime.fromtimestamp(expires, UTC).isoformat())
    assert (await admin.http.get("/v1/queues", headers=bearer(key))).status_code == 200
    clock.advance(61)
    assert_problem(await admin.http.get("/v1/queues", headers=bearer(key)), 401)


async def test_roles_answer_403_naming_what_they_lack(admin: Admin) -> None:
    endpoint = await admin.endpoint(None)
    reader, publisher = bearer(await admin.key("reader")), bearer(await admin.key("publisher"))
    assert (await admin.http.get(f"/v1/endpoints/{endpoint['id']}", headers=reader)).status_code == 200
    secret = await admin.http.get(f"/v1/endpoints/{endpoint['id']}/secret", headers=reader)
    body = assert_problem(secret, 403, "forbidden")
    assert body["role"] == "reader" and body["lacks"] == "read_secret"
    assert_problem(await admin.http.post("/v1/queues/q/tasks", json={"url": HOOK}, headers=reader), 403)
    assert_problem(await admin.http.delete(f"/v1/endpoints/{endpoint['id']}", headers=reader), 403)
    assert (
        await admin.http.post("/v1/queues/q/tasks", json={"url": HOOK}, headers=publisher)
    ).status_code == 201
    assert (await admin.http.get("/v1/tasks", headers=publisher)).status_code == 200
    assert_problem(await admin.http.get(f"/v1/endpoints/{endpoint['id']}", headers=publisher), 403)
    assert_problem(
        await admin.http.post("/v1/keys", json={"name": "x", "role": "admin"}, headers=reader), 403
    )
    assert (await admin.http.get(f"/v1/endpoints/{endpoint['id']}")).status_code == 200  # nothing deleted


async def test_a_tenant_key_sees_its_tenant_only(admin: Admin) -> None:
    own, other = await admin.endpoint("acme"), await admin.endpoint("globex")
    await admin.http.post("/v1/queues/q/tasks", json={"url": HOOK})
    acme = bearer(await admin.key("admin", "acme"))
    assert (await admin.http.get(f"/v1/endpoints/{own['id']}", headers=acme)).status_code == 200
    assert (await admin.http.get(f"/v1/endpoints/{own['id']}/secret", headers=acme)).status_code == 200
    for path in (f"/v1/endpoints/{other['id']}", "/v1/queues", "/v1/queues/q", "/v1/tasks", "/v1/keys",
                 "/v1/audit", "/v1/schedules", "/v1/operations", "/v1/tenants/globex"):  # fmt: skip
        assert_problem(await admin.http.get(path, headers=acme), 404, "not-found")
    listed = (await admin.http.get("/v1/endpoints", headers=acme)).json()["endpoints"]
    assert [e["id"] for e in listed] == [own["id"]]
    assert (await admin.http.get("/v1/endpoints?tenant=globex", headers=acme)).json()["endpoints"] == []
    assert (await admin.http.get("/v1/tenants", headers=acme)).json()["tenants"][0]["tenant"] == "acme"
    # What it creates is its tenant's; naming another tenant is refused.
    made = await admin.http.post("/v1/endpoints", json={"url": HOOK}, headers=acme)
    assert made.status_code == 201 and made.json()["tenant"] == "acme"
    refused = await admin.http.post("/v1/endpoints", json={"url": HOOK, "tenant": "globex"}, headers=acme)
    assert_problem(refused, 403, "forbidden")
    moved = await admin.http.patch(f"/v1/endpoints/{own['id']}", json={"tenant": "globex"}, headers=acme)
    assert_problem(moved, 403)
    event = await admin.http.post("/v1/events", json={"type": "invoice.paid", "payload": {}}, headers=acme)
    assert event.status_code == 201 and event.json()["tenant"] == "acme"
    delivery = event.json()["deliveries"][0]["task_id"]
    assert (await admin.http.get(f"/v1/tasks/{delivery}", headers=acme)).status_code == 200
    # Its own tenant record: read, never changed.
    assert (await admin.http.get("/v1/tenants/acme", headers=acme)).status_code == 200
    assert_problem(await admin.http.patch("/v1/tenants/acme", json={"max_endpoints": 99}, headers=acme), 403)
    # The other tenant's endpoint is untouched.
    assert (await admin.http.get(f"/v1/endpoints/{other['id']}")).json()["tenant"] == "globex"


async def test_the_audit_log_records_changes_and_refusals_without_secrets(admin: Admin) -> None:
    secret = "whsec_" + "Q" * 32
    endpoint = await admin.endpoint(None, signing_secret=secret, headers={"authorization": "Bearer hidden"})
    reader_key = await admin.key("reader")
    await admin.http.delete(f"/v1/endpoints/{endpoint['id']}", headers=bearer(reader_key))
    await admin.http.get("/v1/queues", headers=bearer("wk_not-a-key"))
    await admin.http.post("/v1/queues/q/tasks", json={"url": HOOK})  # enqueue: not audited
    entries = (await admin.http.get("/v1/audit")).json()["entries"]
    actions = [(e["action"], e["outcome"], e["status"]) for e in entries]
    assert actions == [
        ("GET /v1/queues", "denied", 401),
        ("endpoint.delete", "denied", 403),
        ("key.create", "ok", 201),
        ("endpoint.create", "ok", 201),
    ]
    created = entries[-1]
    assert created["target"] == endpoint["id"] and created["actor"]["type"] == "token"
    assert created["changes"]["signing_secret"] == "[redacted]"
    assert created["changes"]["headers"] == {"authorization": "[redacted]"}
    assert created["source_ip"] == "127.0.0.1"
    assert secret not in str(entries) and "hidden" not in str(entries) and reader_key not in str(entries)
    assert entries[1]["actor"]["role"] == "reader" and entries[1]["actor"]["key_id"].startswith("key_")
    denied = (await admin.http.get("/v1/audit", params={"action": "endpoint.delete"})).json()["entries"]
    assert len(denied) == 1


async def test_a_tenant_key_cannot_move_an_endpoint_out_of_its_tenant(admin: Admin) -> None:
    """Even a tenant whose name reads like "none" (review finding: a sentinel string)."""
    for tenant in ("acme", "no tenant"):
        key = bearer(await admin.key("admin", tenant))
        made = await admin.http.post("/v1/endpoints", json={"url": HOOK}, headers=key)
        endpoint_id = made.json()["id"]
        for new in (None, "globex", "no tenant" if tenant == "acme" else "acme"):
            moved = await admin.http.patch(f"/v1/endpoints/{endpoint_id}", json={"tenant": new}, headers=key)
            assert_problem(moved, 403, "forbidden")
        assert (await admin.http.get(f"/v1/endpoints/{endpoint_id}")).json()["tenant"] == tenant


async def test_audit_entries_name_the_tenant_of_what_changed_and_redact_urls(admin: Admin) -> None:
    endpoint = await admin.endpoint("acme", url=HOOK + "?token=s3cret")
    await admin.http.post(f"/v1/endpoints/{endpoint['id']}/disable")
    acme_key = bearer(await admin.key("admin", "acme"))
    await admin.http.post("/v1/endpoints", json={"url": HOOK}, headers=acme_key)
    entries = (await admin.http.get("/v1/audit", params={"tenant": "acme"})).json()["entries"]
    assert [e["action"] for e in entries] == ["endpoint.create", "endpoint.disable", "endpoint.create"]
    assert entries[0]["changes"]["tenant"] == "acme"  # the tenant it was given, not the body's null
    assert "s3cret" not in str(entries) and entries[-1]["changes"]["url"] == HOOK + "?[redacted]"


async def test_refusals_without_a_credential_lock_nobody_out_and_are_recorded_sparingly(admin: Admin) -> None:
    """Any web page can make a browser send requests without a credential (an <img>, a form to
    another site): they must not get its user's address blocked, nor flood the audit log."""
    anonymous = {"authorization": ""}
    long_path = "/v1/" + "A" * 20_000
    for _ in range(30):
        assert (await admin.http.post(long_path, headers=anonymous)).status_code == 401
    assert (await admin.http.get("/v1/queues")).status_code == 200  # the token still works
    entries = (await admin.http.get("/v1/audit", params={"limit": 100})).json()["entries"]
    refusals = [e for e in entries if e["status"] == 401]
    assert len(refusals) == 20  # the first 20 of the minute
    assert all(len(e["action"]) <= 256 for e in refusals)
    assert refusals[0]["actor"] == {
        "type": "anonymous",
        "key_id": None,
        "name": None,
        "role": None,
        "tenant": None,
    }


async def test_wrong_credentials_from_one_address_are_answered_429(admin: Admin) -> None:
    for _ in range(20):
        assert (await admin.http.get("/v1/queues", headers=bearer("wk_" + "x" * 43))).status_code == 401
    assert_problem(await admin.http.get("/v1/queues"), 429, "too-many-failures")  # the token too
    entries, _ = await admin.service.audit.list_audit(AuditFilter(), 100, None)
    assert len([e for e in entries if e.status == 401]) == 20  # every one of them; the 429s none


async def test_control_characters_in_an_audited_path_are_kept_escaped(admin: Admin) -> None:
    refused = await admin.http.get("/v1/keys%00%0aforged", headers=bearer("wk_" + "x" * 43))
    assert_problem(refused, 401)
    [entry] = (await admin.http.get("/v1/audit")).json()["entries"]
    assert entry["action"] == "GET /v1/keys\\x00\\x0aforged"


@pytest.mark.parametrize(
    "params",
    [{"since": "0001-01-01T00:00:00+01:00"}, {"until": "9999-12-31T23:59:59-01:00"}, {"since": "2030-01-01"}],
)
async def test_an_audit_time_out_of_range_is_refused(admin: Admin, params: dict[str, str]) -> None:
    assert_problem(await admin.http.get("/v1/audit", params=params), 422)


async def test_a_key_that_expired_already_is_refused(admin: Admin) -> None:
    made = await admin.http.post(
        "/v1/keys", json={"name": "x", "role": "admin", "expires_at": "2020-01-01T00:00:00Z"}
    )
    assert_problem(made, 422)
    assert (await admin.http.get("/v1/keys")).json()["keys"] == []


async def test_a_tenant_key_follows_the_replays_of_its_own_endpoints_only(admin: Admin) -> None:
    http = admin.http
    own = (await http.post("/v1/endpoints", json={"url": HOOK, "tenant": "acme"})).json()
    other = (await http.post("/v1/endpoints", json={"url": HOOK, "tenant": "globex"})).json()
    since = {"since": "2099-01-01T00:00:00Z"}
    acme_admin, acme_publisher = await admin.key("admin", "acme"), await admin.key("publisher", "acme")
    mine = await http.post(f"/v1/endpoints/{own['id']}/replay", json=since, headers=bearer(acme_admin))
    assert mine.status_code == 202, mine.text
    theirs = (await http.post(f"/v1/endpoints/{other['id']}/replay", json=since)).json()
    bulk = (await http.post("/v1/operations", json={"action": "retry", "filter": {"queue": "q"}})).json()
    assert (
        await http.get(f"/v1/operations/{mine.json()['id']}", headers=bearer(acme_admin))
    ).status_code == 200
    for hidden in (theirs["id"], bulk["id"], "op_nope"):
        assert (await http.get(f"/v1/operations/{hidden}", headers=bearer(acme_admin))).status_code == 404
    assert (await http.get("/v1/operations", headers=bearer(acme_admin))).status_code == 404
    refused = await http.get(f"/v1/operations/{mine.json()['id']}", headers=bearer(acme_publisher))
    assert refused.status_code == 403
    other_tenant = await http.post(
        f"/v1/endpoints/{other['id']}/replay", json=since, headers=bearer(acme_admin)
    )
    assert other_tenant.status_code == 404
