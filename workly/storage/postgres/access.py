"""PostgreSQL's tenants, API keys and audit log (TenantStore, KeyStore, AuditStore); the
queries are in sql/access.sql."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from workly.api_keys import ApiKey, ApiKeySpec
from workly.audit import AuditEntry, AuditFilter
from workly.errors import ApiKeyNotFound, TenantNotFound
from workly.sessions import Session
from workly.storage import rows
from workly.storage.access_rows import (
    audit_filter_params,
    audit_from_row,
    audit_params,
    key_from_row,
    key_params,
    session_from_row,
    session_params,
    tenant_from_row,
    tenant_params,
    tenant_spec_from_row,
)
from workly.storage.contract.access import TenantChange
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import DECODERS, Connection, Connections, execute, fetch, fetchrow
from workly.tenants import Tenant, TenantSpec

T = TypeVar("T")


def _same(value: T) -> T:
    return value


@raises_workly_errors(interpret_postgres_error)
class PostgresTenants:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def put_tenant(self, tenant: str, spec: TenantSpec, now: datetime) -> tuple[Tenant, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            put = await fetchrow(conn, self._q.put_tenant, **tenant_params(tenant, spec, now, _same))
            return await self._read(conn, tenant), bool(put["created"])

    async def update_tenant(self, tenant: str, change: TenantChange, now: datetime) -> Tenant:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await fetchrow(conn, self._q.lock_tenant, tenant=tenant)
            if row is None:
                raise TenantNotFound(tenant)
            spec = change(tenant_spec_from_row(row))
            await execute(conn, self._q.update_tenant, **tenant_params(tenant, spec, now, _same))
            return await self._read(conn, tenant)

    async def _read(self, conn: Connection, tenant: str) -> Tenant:
        row = await fetchrow(conn, self._q.get_tenant, tenant=tenant)
        assert row is not None, "written in this transaction"
        return tenant_from_row(row, DECODERS)

    async def get_tenant(self, tenant: str) -> Tenant | None:
        row = await fetchrow(self._pool, self._q.get_tenant, tenant=tenant)
        return None if row is None else tenant_from_row(row, DECODERS)

    async def list_tenants(self, limit: int, before_seq: int | None) -> tuple[list[Tenant], int | None]:
        found = await fetch(self._pool, self._q.list_tenants, **rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [tenant_from_row(row, DECODERS) for row in shown], next_seq


@raises_workly_errors(interpret_postgres_error)
class PostgresKeys:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def create_key(self, key_id: str, spec: ApiKeySpec, digest: str, now: datetime) -> ApiKey:
        row = await fetchrow(self._pool, self._q.insert_key, **key_params(key_id, spec, digest, now, _same))
        return key_from_row(row, DECODERS)

    async def get_key(self, key_id: str) -> ApiKey | None:
        row = await fetchrow(self._pool, self._q.get_key, id=key_id)
        return None if row is None else key_from_row(row, DECODERS)

    async def key_by_digest(self, digest: str) -> ApiKey | None:
        row = await fetchrow(self._pool, self._q.key_by_digest, digest=digest)
        return None if row is None else key_from_row(row, DECODERS)

    async def list_keys(self, limit: int, before_seq: int | None) -> tuple[list[ApiKey], int | None]:
        found = await fetch(self._pool, self._q.list_keys, **rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [key_from_row(row, DECODERS) for row in shown], next_seq

    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey:
        row = await fetchrow(self._pool, self._q.revoke_key, id=key_id, now=now)
        if row is None:
            raise ApiKeyNotFound(key_id)
        return key_from_row(row, DECODERS)

    async def touch_key(self, key_id: str, now: datetime) -> None:
        await execute(self._pool, self._q.touch_key, id=key_id, now=now)


@raises_workly_errors(interpret_postgres_error)
class PostgresAudit:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def add_audit(self, entry: AuditEntry) -> None:
        await execute(self._pool, self._q.insert_audit, **audit_params(entry, _same, _same))

    async def list_audit(
        self, audit_filter: AuditFilter, limit: int, before_seq: int | None
    ) -> tuple[list[AuditEntry], int | None]:
        params = {**rows.page_params(limit, before_seq), **audit_filter_params(audit_filter, _same)}
        found = await fetch(self._pool, self._q.list_audit, **params)
        shown, next_seq = rows.page(found, limit)
        return [audit_from_row(row, DECODERS) for row in shown], next_seq

    async def prune_audit(self, cutoff: datetime, limit: int) -> int:
        return len(await fetch(self._pool, self._q.prune_audit, cutoff=cutoff, limit=limit))


@raises_workly_errors(interpret_postgres_error)
class PostgresSessions:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def create_session(self, session: Session, digest: str, prune_before: datetime) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await fetch(conn, self._q.prune_sessions, cutoff=prune_before, limit=100)
            await fetch(conn, self._q.insert_session, **session_params(session, digest, _same))

    async def session_by_digest(self, digest: str) -> Session | None:
        row = await fetchrow(self._pool, self._q.session_by_digest, digest=digest)
        return None if row is None else session_from_row(row, DECODERS)

    async def end_session(self, digest: str, now: datetime) -> bool:
        return bool(await fetch(self._pool, self._q.end_session, digest=digest, now=now))
