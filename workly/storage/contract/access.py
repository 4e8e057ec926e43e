"""Tenants (workly/tenants.py), API keys (workly/api_keys.py) and the audit log (workly/audit.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from workly.api_keys import ApiKey, ApiKeySpec
from workly.audit import AuditEntry, AuditFilter
from workly.sessions import Session
from workly.tenants import Tenant, TenantSpec

TenantChange = Callable[[TenantSpec], TenantSpec]


class TenantStore(Protocol):
    async def put_tenant(self, tenant: str, spec: TenantSpec, now: datetime) -> tuple[Tenant, bool]:
        """Create or replace; whether it was created."""

    async def update_tenant(self, tenant: str, change: TenantChange, now: datetime) -> Tenant:
        """Replace the spec with ``change(stored spec)``, atomically. Raises TenantNotFound."""

    async def get_tenant(self, tenant: str) -> Tenant | None: ...

    async def list_tenants(self, limit: int, before_seq: int | None) -> tuple[list[Tenant], int | None]:
        """Newest first; the int continues the list."""


class KeyStore(Protocol):
    async def create_key(self, key_id: str, spec: ApiKeySpec, digest: str, now: datetime) -> ApiKey: ...

    async def get_key(self, key_id: str) -> ApiKey | None: ...

    async def key_by_digest(self, digest: str) -> ApiKey | None:
        """The key whose SHA-256 digest this is, revoked or expired ones included."""

    async def list_keys(self, limit: int, before_seq: int | None) -> tuple[list[ApiKey], int | None]: ...

    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey:
        """Mark it revoked (a key revoked before keeps its time). Raises ApiKeyNotFound."""

    async def touch_key(self, key_id: str, now: datetime) -> None:
        """Set its last_used_at to ``now`` (never back in time)."""


class AuditStore(Protocol):
    async def add_audit(self, entry: AuditEntry) -> None: ...

    async def list_audit(
        self, audit_filter: AuditFilter, limit: int, before_seq: int | None
    ) -> tuple[list[AuditEntry], int | None]:
        """Newest first; the int continues the list."""

    async def prune_audit(self, cutoff: datetime, limit: int) -> int:
        """Delete up to ``limit`` entries older than ``cutoff``; how many."""


class SessionStore(Protocol):
    async def create_session(self, session: Session, digest: str, prune_before: datetime) -> None:
        """Store a new session, found by ``digest``; first delete up to 100 sessions that
        expired or ended before ``prune_before`` (logins keep the table small)."""

    async def session_by_digest(self, digest: str) -> Session | None: ...

    async def end_session(self, digest: str, now: datetime) -> bool:
        """Mark the session ended (at its first end); whether there was one."""
