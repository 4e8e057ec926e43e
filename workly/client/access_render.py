"""Plain-text output of the tenant, API key and audit log commands (access_commands.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workly.client.render import fields, one_line, short_time, table


def tenant_detail(tenant: dict[str, Any]) -> str:
    limit = tenant["max_endpoints"]
    return fields([
        ("tenant", tenant["tenant"]), ("name", tenant["name"]),
        ("metadata", "; ".join(f"{k}={v}" for k, v in tenant["metadata"].items())),
        ("retention", None if tenant["retention"] is None else f"{tenant['retention']}s"),
        ("endpoints", tenant["endpoints"] if limit is None else f"{tenant['endpoints']} of at most {limit}"),
        ("created", short_time(tenant["created_at"])), ("updated", short_time(tenant["updated_at"])),
    ])  # fmt: skip


def tenant_rows(tenants: Sequence[dict[str, Any]]) -> str:
    return table(
        ["TENANT", "NAME", "ENDPOINTS", "MAX", "CREATED"],
        [
            [t["tenant"], t["name"], t["endpoints"], t["max_endpoints"], short_time(t["created_at"])]
            for t in tenants
        ],
    )


def new_key(key: dict[str, Any]) -> str:
    """The key once, with a reminder that it is never shown again."""
    return (
        f"{one_line(key['key'])}\n\n"
        + key_detail(key)
        + "\n\nKeep the key now: Workly stores only its hash and cannot show it again."
    )


def key_detail(key: dict[str, Any]) -> str:
    return fields([
        ("id", key["id"]), ("name", key["name"]), ("role", key["role"]),
        ("tenant", key["tenant"] or "every tenant"),
        ("expires", short_time(key["expires_at"]) or "never"), ("created", short_time(key["created_at"])),
        ("last used", short_time(key["last_used_at"])), ("revoked", short_time(key["revoked_at"])),
    ])  # fmt: skip


def key_rows(keys: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ID", "NAME", "ROLE", "TENANT", "EXPIRES", "LAST USED", "REVOKED"],
        [[k["id"], k["name"], k["role"], k["tenant"], short_time(k["expires_at"]),
          short_time(k["last_used_at"]), short_time(k["revoked_at"])] for k in keys],
    )  # fmt: skip


def audit_rows(entries: Sequence[dict[str, Any]]) -> str:
    return table(
        ["AT", "ACTOR", "ACTION", "TARGET", "TENANT", "OUTCOME", "STATUS", "FROM"],
        [[short_time(e["at"]), e["actor"].get("key_id") or e["actor"]["type"], e["action"], e["target"],
          e["tenant"], e["outcome"], e["status"], e["source_ip"]] for e in entries],
    )  # fmt: skip
