"""SQLite's tenants, API keys and audit log (TenantStore, KeyStore, AuditStore); the
queries are in sql/access.sql. Each write runs in one BEGIN IMMEDIATE transaction."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from workly.api_keys import ApiKey, ApiKeySpec
from workly.audit import AuditEntry, AuditFilter
from workly.errors import ApiKeyNotFound, TenantNotFound
from workly.json_text import to_json
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
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import DECODERS, Connections, execute, fetchall, fetchone, to_us
from workly.tenants import Tenant, TenantSpec

Db = sqlite3.Connection
_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteTenants:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def put_tenant(self, tenant: str, spec: TenantSpec, now: datetime) -> tuple[Tenant, bool]:
        return await self._writer.transaction(self._acknowledged, _put_tenant, tenant, spec, to_us(now))

    async def update_tenant(self, tenant: str, change: TenantChange, now: datetime) -> Tenant:
        return await self._writer.transaction(self._acknowledged, _update_tenant, tenant, change, to_us(now))

    async def get_tenant(self, tenant: str) -> Tenant | None:
        row = await self._reader.run(fetchone, _q().get_tenant, {"tenant": tenant})
        return None if row is None else tenant_from_row(row, DECODERS)

    async def list_tenants(self, limit: int, before_seq: int | None) -> tuple[list[Tenant], int | None]:
        found = await self._reader.run(fetchall, _q().list_tenants, rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [tenant_from_row(row, DECODERS) for row in shown], next_seq


def _put_tenant(db: Db, tenant: str, spec: TenantSpec, now_us: int) -> tuple[Tenant, bool]:
    created = fetchone(db, _q().get_tenant, {"tenant": tenant}) is None
    execute(db, _q().put_tenant, tenant_params(tenant, spec, now_us, to_json))
    return _read_tenant(db, tenant), created


def _update_tenant(db: Db, tenant: str, change: TenantChange, now_us: int) -> Tenant:
    row = fetchone(db, _q().lock_tenant, {"tenant": tenant})
    if row is None:
        raise TenantNotFound(tenant)
    execute(
        db,
        _q().update_tenant,
        tenant_params(tenant, change(tenant_spec_from_row(row)), now_us, to_json),
    )
    return _read_tenant(db, tenant)


def _read_tenant(db: Db, tenant: str) -> Tenant:
    row = fetchone(db, _q().get_tenant, {"tenant": tenant})
    assert row is not None, "written in this transaction"
    return tenant_from_row(row, DECODERS)


@raises_workly_errors(interpret_sqlite_error)
class SqliteKeys:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def create_key(self, key_id: str, spec: ApiKeySpec, digest: str, now: datetime) -> ApiKey:
        params = key_params(key_id, spec, digest, to_us(now), to_us)
        [row] = await self._writer.transaction(self._acknowledged, fetchall, _q().insert_key, params)
        return key_from_row(row, DECODERS)

    async def get_key(self, key_id: str) -> ApiKey | None:
        row = await self._reader.run(fetchone, _q().get_key, {"id": key_id})
        return None if row is None else key_from_row(row, DECODERS)

    async def key_by_digest(self, digest: str) -> ApiKey | None:
        row = await self._reader.run(fetchone, _q().key_by_digest, {"digest": digest})
        return None if row is None else key_from_row(row, DECODERS)

    async def list_keys(self, limit: int, before_seq: int | None) -> tuple[list[ApiKey], int | None]:
        found = await self._reader.run(fetchall, _q().list_keys, rows.page_params(limit, before_seq))
        shown, next_seq = rows.page(found, limit)
        return [key_from_row(row, DECODERS) for row in shown], next_seq

    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey:
        params = {"id": key_id, "now": to_us(now)}
        found = await self._writer.transaction(self._acknowledged, fetchall, _q().revoke_key, params)
        if not found:
            raise ApiKeyNotFound(key_id)
        return key_from_row(found[0], DECODERS)

    async def touch_key(self, key_id: str, now: datetime) -> None:
        params = {"id": key_id, "now": to_us(now)}
        await self._writer.transaction(self._acknowledged, execute, _q().touch_key, params)


@raises_workly_errors(interpret_sqlite_error)
class SqliteAudit:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def add_audit(self, entry: AuditEntry) -> None:
        await self._writer.transaction(
            self._acknowledged, execute, _q().insert_audit, audit_params(entry, to_us, to_json)
        )

    async def list_audit(
        self, audit_filter: AuditFilter, limit: int, before_seq: int | None
    ) -> tuple[list[AuditEntry], int | None]:
        params = {**rows.page_params(limit, before_seq), **audit_filter_params(audit_filter, to_us)}
        found = await self._reader.run(fetchall, _q().list_audit, params)
        shown, next_seq = rows.page(found, limit)
        return [audit_from_row(row, DECODERS) for row in shown], next_seq

    async def prune_audit(self, cutoff: datetime, limit: int) -> int:
        params = {"cutoff": to_us(cutoff), "limit": limit}
        pruned = await self._writer.transaction(self._acknowledged, fetchall, _q().prune_audit, params)
        return len(pruned)


@raises_workly_errors(interpret_sqlite_error)
class SqliteSessions:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def create_session(self, session: Session, digest: str, prune_before: datetime) -> None:
        await self._writer.transaction(
            self._acknowledged, _create_session, session_params(session, digest, to_us), to_us(prune_before)
        )

    async def session_by_digest(self, digest: str) -> Session | None:
        row = await self._reader.run(fetchone, _q().session_by_digest, {"digest": digest})
        return None if row is None else session_from_row(row, DECODERS)

    async def end_session(self, digest: str, now: datetime) -> bool:
        params = {"digest": digest, "now": to_us(now)}
        return bool(await self._writer.transaction(self._acknowledged, fetchall, _q().end_session, params))


def _create_session(db: Db, params: dict[str, object], prune_before_us: int) -> None:
    fetchall(db, _q().prune_sessions, {"cutoff": prune_before_us, "limit": 100})
    fetchall(db, _q().insert_session, params)
