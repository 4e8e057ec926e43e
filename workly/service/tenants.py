"""Tenants' use cases (docs/tenants.md): create or replace, change, read, list."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from workly.clock import Clock
from workly.errors import TenantNotFound
from workly.storage.contract import TenantStore
from workly.tenants import Tenant, TenantSpec

TENANT_FIELDS = frozenset(f.name for f in fields(TenantSpec))


class TenantUseCases:
    def __init__(self, tenants: TenantStore, clock: Clock) -> None:
        self._tenants = tenants
        self._clock = clock

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

    async def list_tenants(self, limit: int, before_seq: int | None) -> tuple[list[Tenant], int | None]:
        return await self._tenants.list_tenants(limit, before_seq)
