"""Tenants, API keys and audit log entries as the API answers them."""

from __future__ import annotations

from typing import Any

from workly.api_keys import ApiKey
from workly.audit import AuditEntry
from workly.task_json import time_text
from workly.tenants import Tenant
from workly.web.representation import time_or_null


def tenant_json(tenant: Tenant) -> dict[str, Any]:
    spec = tenant.spec
    return {
        "tenant": tenant.tenant,
        "name": spec.name if spec.name is not None else tenant.tenant,
        "metadata": spec.metadata,
        "retention": spec.retention,
        "max_endpoints": spec.max_endpoints,
        "endpoints": tenant.endpoints,
        "created_at": time_text(tenant.created_at),
        "updated_at": time_text(tenant.updated_at),
    }


def key_json(key: ApiKey, secret: str | None = None) -> dict[str, Any]:
    """A key as listed; ``secret``: the key itself, in the answer that creates it only."""
    spec = key.spec
    shown = {
        "id": key.id,
        "name": spec.name,
        "role": spec.role,
        "tenant": spec.tenant,
        "expires_at": time_or_null(spec.expires_at),
        "created_at": time_text(key.created_at),
        "last_used_at": time_or_null(key.last_used_at),
        "revoked_at": time_or_null(key.revoked_at),
    }
    return shown if secret is None else {"key": secret, **shown}


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "at": time_text(entry.at),
        "actor": entry.actor,
        "action": entry.action,
        "target": entry.target,
        "tenant": entry.tenant,
        "outcome": entry.outcome,
        "status": entry.status,
        "source_ip": entry.source_ip,
        "user_agent": entry.user_agent,
        "changes": entry.changes,
    }
