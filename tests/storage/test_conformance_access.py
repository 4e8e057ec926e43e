"""The storage contract for tenants, API keys and the audit log: stored and read back whole,
tenants made on first use by endpoints and events (API and SQL), max_endpoints held under
concurrent creations, keys found by digest and revoked, the audit log filtered, paged and
pruned. Every test runs on SQLite and on PostgreSQL, on the injected clock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.storage.helpers import URL
from tests.support.clock import VirtualClock
from workly.api_keys import ApiKeySpec, key_digest, new_key
from workly.audit import AuditEntry, AuditFilter
from workly.errors import ApiKeyNotFound, TenantNotFound, TooManyEndpoints
from workly.ids import new_id, new_task_id
from workly.models import QueueConfig
from workly.storage.contract import Storage
from workly.tenants import TenantSpec
from workly.webhooks import EndpointSpec, NewEvent

SPEC = TenantSpec(
    name="Acme Inc.", metadata={"plan": "pro", "region": "eu"}, retention=86400, max_endpoints=3
)


def endpoint(tenant: str | None) -> EndpointSpec:
    return EndpointSpec(url=URL, tenant=tenant, delivery=QueueConfig(signing_secret="whsec_" + "A" * 32))


async def test_a_tenant_is_stored_replaced_and_read_back_whole(storage: Storage, clock: VirtualClock) -> None:
    tenant, created = await storage.tenants.put_tenant("acme", SPEC, clock.now())
    assert created and tenant.spec == SPEC and tenant.endpoints == 0
    assert tenant.created_at == tenant.updated_at == clock.now()
    later = clock.advance(5)
    replaced, created = await storage.tenants.put_tenant("acme", TenantSpec(name="Acme"), later)
    assert not created
    assert replaced.spec == TenantSpec(name="Acme") and replaced.updated_at == later
    assert replaced.created_at == tenant.created_at
    assert await storage.tenants.get_tenant("acme") == replaced
    assert await storage.tenants.get_tenant("globex") is None


async def test_a_tenant_is_changed_atomically(storage: Storage, clock: VirtualClock) -> None:
    await storage.tenants.put_tenant("acme", SPEC, clock.now())
    renamed = lambda spec: TenantSpec(**{**vars_of(spec), "name": "A"})  # noqa: E731
    changed = await storage.tenants.update_tenant("acme", renamed, clock.advance(1))
    assert changed.spec.name == "A" and changed.spec.metadata == SPEC.metadata
    with pytest.raises(TenantNotFound):
        await storage.tenants.update_tenant("nobody", lambda spec: spec, clock.now())


def vars_of(spec: TenantSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in ("name", "metadata", "retention", "max_endpoints")}


async def test_tenants_are_listed_newest_first_in_pages(storage: Storage, clock: VirtualClock) -> None:
    for name in ("a", "b", "c"):
        await storage.tenants.put_tenant(name, TenantSpec(), clock.now())
    first, after = await storage.tenants.list_tenants(2, None)
    assert [t.tenant for t in first] == ["c", "b"] and after is not None
    rest, after = await storage.tenants.list_tenants(2, after)
    assert [t.tenant for t in rest] == ["a"] and after is None


async def test_endpoints_and_events_make_their_tenant_on_first_use(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.webhooks.create_endpoint(new_id("ep"), endpoint("acme"), clock.now())
    await storage.webhooks.create_endpoint(new_id("ep"), endpoint(None), clock.now())
    event = NewEvent(id=new_id("evt"), type="invoice.paid", payload=b"{}", content_type="application/json",
                     tenant="globex")  # fmt: skip
    await storage.webhooks.publish(event, clock.now(), new_task_id)
    acme, globex = await storage.tenants.get_tenant("acme"), await storage.tenants.get_tenant("globex")
    assert acme is not None and acme.endpoints == 1 and acme.spec == TenantSpec()
    assert globex is not None and globex.endpoints == 0
    listed, _ = await storage.tenants.list_tenants(10, None)
    assert {t.tenant for t in listed} == {"acme", "globex"}


async def test_a_tenant_holds_at_most_max_endpoints_however_many_are_created_at_once(
    storage: Storage, clock: VirtualClock
) -> None:
    await storage.tenants.put_tenant("acme", SPEC, clock.now())  # max_endpoints=3
    results = await asyncio.gather(
        *(storage.webhooks.create_endpoint(new_id("ep"), endpoint("acme"), clock.now()) for _ in range(8)),
        return_exceptions=True,
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 3
    assert all(isinstance(r, TooManyEndpoints) for r in results if isinstance(r, BaseException))
    acme = await storage.tenants.get_tenant("acme")
    assert acme is not None and acme.endpoints == 3
    # Moving an endpoint into a full tenant is refused too, and changes nothing.
    other = await storage.webhooks.create_endpoint(new_id("ep"), endpoint("globex"), clock.now())
    with pytest.raises(TooManyEndpoints):
        await storage.webhooks.update_endpoint(other.id, lambda spec: endpoint("acme"), clock.now())
    assert (await storage.webhooks.get_endpoint(other.id)).spec.tenant == "globex"  # type: ignore[union-attr]


async def test_a_key_is_stored_found_by_its_digest_and_revoked(storage: Storage, clock: VirtualClock) -> None:
    key = new_key()
    expires = clock.now() + timedelta(days=30)
    spec = ApiKeySpec(name="support", role="reader", tenant="acme", expires_at=expires)
    stored = await storage.keys.create_key("key_1", spec, key_digest(key), clock.now())
    assert stored.spec == spec and stored.last_used_at is None and stored.revoked_at is None
    assert await storage.keys.key_by_digest(key_digest(key)) == stored
    assert await storage.keys.key_by_digest(key_digest(new_key())) is None
    await storage.keys.touch_key("key_1", clock.advance(3))
    touched = await storage.keys.get_key("key_1")
    assert touched is not None and touched.last_used_at == clock.now()
    await storage.keys.touch_key("key_1", clock.now() - timedelta(seconds=1))  # never back in time
    assert (await storage.keys.get_key("key_1")).last_used_at == clock.now()  # type: ignore[union-attr]
    revoked = await storage.keys.revoke_key("key_1", clock.advance(1))
    assert revoked.revoked_at == clock.now() and not revoked.usable_at(clock.now())
    again = await storage.keys.revoke_key("key_1", clock.advance(1))
    assert again.revoked_at == revoked.revoked_at  # the first revocation's time stays
    with pytest.raises(ApiKeyNotFound):
        await storage.keys.revoke_key("key_nobody", clock.now())
    listed, after = await storage.keys.list_keys(10, None)
    assert [k.id for k in listed] == ["key_1"] and after is None


def entry(
    clock: VirtualClock, action: str, tenant: str | None = None, key_id: str | None = None
) -> AuditEntry:
    actor = {
        "type": "key" if key_id else "token",
        "key_id": key_id,
        "name": None,
        "role": "admin",
        "tenant": None,
    }
    return AuditEntry(
        id=new_id("aud"), at=clock.now(), actor=actor, action=action, target="ep_1", tenant=tenant,
        outcome="ok", status=200, source_ip="127.0.0.1", user_agent="test", changes={"url": URL},
    )  # fmt: skip


async def test_the_audit_log_is_filtered_paged_and_pruned(storage: Storage, clock: VirtualClock) -> None:
    first = entry(clock, "endpoint.create", "acme", "key_1")
    await storage.audit.add_audit(first)
    clock.advance(60)
    await storage.audit.add_audit(entry(clock, "endpoint.update", "acme"))
    clock.advance(60)
    await storage.audit.add_audit(entry(clock, "key.revoke"))
    everything, after = await storage.audit.list_audit(AuditFilter(), 10, None)
    assert [e.action for e in everything] == ["key.revoke", "endpoint.update", "endpoint.create"]
    assert everything[-1] == first and after is None
    by_actor, _ = await storage.audit.list_audit(AuditFilter(actor="key_1"), 10, None)
    assert [e.action for e in by_actor] == ["endpoint.create"]
    by_token, _ = await storage.audit.list_audit(AuditFilter(actor="token"), 10, None)
    assert len(by_token) == 2
    acme, _ = await storage.audit.list_audit(AuditFilter(tenant="acme", action="endpoint.update"), 10, None)
    assert [e.action for e in acme] == ["endpoint.update"]
    window = AuditFilter(since=first.at + timedelta(seconds=30), until=first.at + timedelta(seconds=90))
    assert [e.action for e in (await storage.audit.list_audit(window, 10, None))[0]] == ["endpoint.update"]
    page, after = await storage.audit.list_audit(AuditFilter(), 2, None)
    assert len(page) == 2 and after is not None
    assert [e.action for e in (await storage.audit.list_audit(AuditFilter(), 2, after))[0]] == [
        "endpoint.create"
    ]
    assert await storage.audit.prune_audit(first.at + timedelta(seconds=90), 1) == 1
    assert await storage.audit.prune_audit(first.at + timedelta(seconds=90), 10) == 1
    assert [e.action for e in (await storage.audit.list_audit(AuditFilter(), 10, None))[0]] == ["key.revoke"]
