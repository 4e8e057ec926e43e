"""Tenants', API keys' and the audit log's use cases as one principal may call them. A
tenant-scoped key reads its own tenant record (and changes none); keys and the audit log
are for untenanted admins only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict
from typing import Any

from workly.api_keys import ApiKey, ApiKeySpec
from workly.audit import AuditEntry, AuditFilter
from workly.errors import PermissionDenied, TenantNotFound
from workly.operations import Operation
from workly.service.access.decisions import Access
from workly.service.audit import AuditUseCases
from workly.service.bulk_operations import BulkOperationUseCases
from workly.service.export import ExportItem
from workly.service.keys import KeyUseCases
from workly.service.tenants import TenantUseCases
from workly.tenants import Tenant, TenantSpec


class ScopedTenants:
    def __init__(self, tenants: TenantUseCases, operations: BulkOperationUseCases, access: Access) -> None:
        self._tenants = tenants
        self._operations = operations
        self._access = access

    def _change(self, action: str, tenant: str, changes: Mapping[str, Any]) -> None:
        """A tenant's record is changed by untenanted admins: its own keys read it (403)."""
        access = self._access
        access.see(tenant, TenantNotFound(tenant))
        access.act(action, "write", tenant, tenant, changes)
        if access.tenant is not None:
            detail = f"a key scoped to tenant {tenant!r} reads its tenant's record but cannot change it"
            raise PermissionDenied(access.principal.role, "write", action, detail)

    async def put_tenant(self, tenant: str, spec: TenantSpec) -> tuple[Tenant, bool]:
        self._change("tenant.put", tenant, asdict(spec))
        return await self._tenants.put_tenant(tenant, spec)

    async def update_tenant(self, tenant: str, changes: Mapping[str, Any]) -> Tenant:
        self._change("tenant.update", tenant, changes)
        return await self._tenants.update_tenant(tenant, changes)

    async def erase_tenant(self, tenant: str) -> Operation:
        self._change("tenant.erase", tenant, {})
        return await self._operations.erase_tenant(tenant)

    async def export_tenant(self, tenant: str) -> AsyncIterator[ExportItem]:
        self._access.see(tenant, TenantNotFound(tenant))
        self._access.act("tenant.export", "read", tenant, tenant)
        return await self._tenants.export_tenant(tenant, operators=self._access.tenant is None)

    async def get_tenant(self, tenant: str) -> Tenant:
        self._access.see(tenant, TenantNotFound(tenant))
        self._access.act("tenant.read", "read", tenant, tenant)
        return await self._tenants.get_tenant(tenant)

    async def list_tenants(self, limit: int, before_seq: int | None) -> tuple[list[Tenant], int | None]:
        access = self._access
        access.act("tenant.list", "read")
        if access.tenant is None:
            return await self._tenants.list_tenants(limit, before_seq)
        if before_seq is not None:  # its one tenant was on the first page
            return [], None
        try:
            return [await self._tenants.get_tenant(access.tenant)], None
        except TenantNotFound:
            return [], None


class ScopedKeys:
    def __init__(self, keys: KeyUseCases, access: Access) -> None:
        self._keys = keys
        self._access = access

    def _act(self, action: str, target: str | None = None, changes: Mapping[str, Any] | None = None) -> None:
        self._access.untenanted("API keys" if target is None else f"API key {target!r}")
        self._access.act(action, "manage_access", target, changes=changes)

    async def create_key(self, spec: ApiKeySpec) -> tuple[ApiKey, str]:
        self._act("key.create", changes=asdict(spec) | {"expires_at": _text(spec)})
        key, secret = await self._keys.create_key(spec)
        self._access.note.target = key.id
        return key, secret

    async def get_key(self, key_id: str) -> ApiKey:
        self._act("key.read", key_id)
        return await self._keys.get_key(key_id)

    async def list_keys(self, limit: int, before_seq: int | None) -> tuple[list[ApiKey], int | None]:
        self._act("key.list")
        return await self._keys.list_keys(limit, before_seq)

    async def revoke_key(self, key_id: str) -> ApiKey:
        self._act("key.revoke", key_id)
        return await self._keys.revoke_key(key_id)


def _text(spec: ApiKeySpec) -> str | None:
    return None if spec.expires_at is None else spec.expires_at.isoformat()


class ScopedAudit:
    def __init__(self, audit: AuditUseCases, access: Access) -> None:
        self._audit = audit
        self._access = access

    async def list_audit(
        self, audit_filter: AuditFilter, limit: int, before_seq: int | None
    ) -> tuple[list[AuditEntry], int | None]:
        self._access.untenanted("the audit log")
        self._access.act("audit.list", "manage_access")
        return await self._audit.list_audit(audit_filter, limit, before_seq)
