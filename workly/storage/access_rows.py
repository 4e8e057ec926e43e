"""Rows of tenants, API keys and the audit log as domain objects, and their parameters, for
both dialects (each passes its own time encoder and ``Decoders``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from workly.api_keys import ApiKey, ApiKeySpec
from workly.audit import AuditEntry, AuditFilter
from workly.json_text import from_json
from workly.sessions import Session
from workly.storage.rows import Decoders, Row
from workly.tenants import Tenant, TenantSpec

TimeEncoder = Callable[[datetime], Any]
# How a dialect takes a JSON column's value: PostgreSQL's pool encodes the object itself,
# SQLite stores text.
JsonEncoder = Callable[[Any], Any]


def _json(value: Any) -> Any:
    return from_json(value) if isinstance(value, str) else value


def _time_or_none(value: Any, dec: Decoders) -> datetime | None:
    return None if value is None else dec.time(value)


def _or_none(value: datetime | None, encode: TimeEncoder) -> Any:
    return None if value is None else encode(value)


def tenant_params(tenant: str, spec: TenantSpec, now: Any, encode_json: JsonEncoder) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "name": spec.name,
        "metadata": encode_json(spec.metadata),
        "retention": spec.retention,
        "max_endpoints": spec.max_endpoints,
        "now": now,
    }


def tenant_spec_from_row(row: Row) -> TenantSpec:
    return TenantSpec(
        name=row["name"],
        metadata=dict(_json(row["metadata"])),
        retention=row["retention"],
        max_endpoints=row["max_endpoints"],
    )


def tenant_from_row(row: Row, dec: Decoders) -> Tenant:
    """A row of get_tenant or list_tenants (with its endpoints counted)."""
    return Tenant(
        row["tenant"], tenant_spec_from_row(row), int(row["endpoints"]), dec.time(row["created_at"]),
        dec.time(row["updated_at"]),
    )  # fmt: skip


def key_params(key_id: str, spec: ApiKeySpec, digest: str, now: Any, encode: TimeEncoder) -> dict[str, Any]:
    return {
        "id": key_id,
        "digest": digest,
        "name": spec.name,
        "role": spec.role,
        "tenant": spec.tenant,
        "expires_at": _or_none(spec.expires_at, encode),
        "now": now,
    }


def key_from_row(row: Row, dec: Decoders) -> ApiKey:
    spec = ApiKeySpec(
        name=row["name"],
        role=row["role"],
        tenant=row["tenant"],
        expires_at=_time_or_none(row["expires_at"], dec),
    )
    return ApiKey(
        id=row["id"],
        spec=spec,
        created_at=dec.time(row["created_at"]),
        last_used_at=_time_or_none(row["last_used_at"], dec),
        revoked_at=_time_or_none(row["revoked_at"], dec),
    )


def audit_params(entry: AuditEntry, encode: TimeEncoder, encode_json: JsonEncoder) -> dict[str, Any]:
    actor_key = entry.actor.get("key_id") or entry.actor.get("type") or "anonymous"
    return {
        "id": entry.id,
        "at": encode(entry.at),
        "actor": encode_json(entry.actor),
        "actor_key": actor_key,
        "action": entry.action,
        "target": entry.target,
        "tenant": entry.tenant,
        "outcome": entry.outcome,
        "status": entry.status,
        "source_ip": entry.source_ip,
        "user_agent": entry.user_agent,
        "changes": encode_json(entry.changes),
    }


def audit_filter_params(audit_filter: AuditFilter, encode: TimeEncoder) -> dict[str, Any]:
    return {
        "actor": audit_filter.actor,
        "action": audit_filter.action,
        "tenant": audit_filter.tenant,
        "since": _or_none(audit_filter.since, encode),
        "until": _or_none(audit_filter.until, encode),
    }


def audit_from_row(row: Row, dec: Decoders) -> AuditEntry:
    return AuditEntry(
        id=row["id"],
        at=dec.time(row["at"]),
        actor=dict(_json(row["actor"])),
        action=row["action"],
        target=row["target"],
        tenant=row["tenant"],
        outcome=row["outcome"],
        status=row["status"],
        source_ip=row["source_ip"],
        user_agent=row["user_agent"],
        changes=dict(_json(row["changes"])),
    )


def session_params(session: Session, digest: str, encode: TimeEncoder) -> dict[str, Any]:
    return {
        "id": session.id,
        "digest": digest,
        "key_id": session.key_id,
        "token_mac": session.token_mac,
        "created_at": encode(session.created_at),
        "expires_at": encode(session.expires_at),
    }


def session_from_row(row: Row, dec: Decoders) -> Session:
    return Session(
        id=row["id"],
        key_id=row["key_id"],
        token_mac=row["token_mac"],
        created_at=dec.time(row["created_at"]),
        expires_at=dec.time(row["expires_at"]),
        ended_at=_time_or_none(row["ended_at"], dec),
    )
