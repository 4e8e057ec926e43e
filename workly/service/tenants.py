"""Tenants' use cases (docs/tenants.md): create or replace, change, read, list, export
(docs/retention.md; their erasure is a bulk operation)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import fields, replace
from typing import Any

from workly.clock import Clock
from workly.errors import TenantNotFound
from workly.service.export import ExportItem, TenantExport
from workly.storage.contract import TenantStore
from workly.tenants import Tenant, TenantSpec

TENANT_FIELDS = frozenset(f.name for f in fields(TenantSpec))


class TenantUseCases:
    def __init__(self, tenants: TenantStore, clock: Clock, export: TenantExport) -> None:
        self._tenants = tenants
        self._clock = clock
        self._export = export

    async def put_tenant(self, tenant: str, spec: TenantSpec) -> tuple[Tenant, bool]:
        """Create or replace; whether it was created."""
        return await self._tenants.put_tenant(tenant, spec, self._clock.now())

    async def update_tenant(self, tenant: str, changes: Mapping[str, Any]) -> Tenant:
        unknown = set(changes) - TENANT_FIELDS
        assert not unknown, f"not tenant fields: {unknown}"
        return await self._tenants.update_tenant(
            tenant, lambda spec: replace(spec, **changes), self._clock.now()
        )

    async def get_tenant(self, tenant: str) -> Tenant:
        found = await self._tenants.get_tenant(tenant)
        if found is None:
            raise TenantNotFound(tenant)
        return found

    async def export_tenant(self, tenant: str, operators: bool = True) -> AsyncIterator[ExportItem]:
        """Everything of the tenant, item by item (TenantNotFound before the first);
        ``operators``: its plain tasks and test deliveries too."""
        return await self._export.items(tenant, operators)

    async def list_tenants(self, limit: int, before_seq: int | None) -> tuple[list[Tenant], int | None]:
        return await self._tenants.list_tenants(limit, before_seq)
