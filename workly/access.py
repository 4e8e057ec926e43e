"""Who is calling, and what each role may do (docs/security.md).

A request is made by a ``Principal``: a bootstrap token (WORKLY_API_TOKENS, always an
untenanted admin), an API key stored in the database (a role and an optional tenant) or,
later, a portal session. What a role may do is the table ``GRANTS``; which objects a
tenant-scoped principal sees is decided by the service's access layer
(the package workly/service/access), the one place every adapter's call passes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Role = Literal["admin", "reader", "publisher"]
ROLES: tuple[Role, ...] = get_args(Role)
ActorType = Literal["key", "token", "portal", "anonymous"]

# What a call needs. "read": queues, endpoints, schedules, operations, tenants (never a
# secret); "read_messages": tasks, their attempts, events; "read_secret": signing secrets;
# "publish": enqueue and publish; "write": every other change; "manage_access": keys and
# the audit log.
Permission = Literal["read", "read_messages", "read_secret", "publish", "write", "manage_access"]
PERMISSIONS: tuple[Permission, ...] = get_args(Permission)
GRANTS: dict[Role, frozenset[Permission]] = {
    "admin": frozenset(PERMISSIONS),
    "reader": frozenset({"read", "read_messages"}),
    "publisher": frozenset({"publish", "read_messages"}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request."""

    type: ActorType
    role: Role
    tenant: str | None = None  # only this tenant's objects exist for it
    key_id: str | None = None  # the API key's id (a key or a portal session's key)
    name: str | None = None

    def can(self, permission: Permission) -> bool:
        return self.type != "anonymous" and permission in GRANTS[self.role]

    def actor(self) -> dict[str, str | None]:
        """As the audit log records it (nobody has no role and no tenant)."""
        if self.type == "anonymous":
            return {"type": "anonymous", "key_id": None, "name": None, "role": None, "tenant": None}
        return {"type": self.type, "key_id": self.key_id, "name": self.name, "role": self.role,
                "tenant": self.tenant}  # fmt: skip


# A caller with one of WORKLY_API_TOKENS, or anyone when `workly dev` runs without tokens.
BOOTSTRAP = Principal(type="token", role="admin", name="WORKLY_API_TOKENS")
# The caller of a route open to all (/health, /metrics, the login page): it may do nothing,
# and its tenant, which no object has (tenant names are never empty), hides every object.
ANONYMOUS = Principal(type="anonymous", role="reader", tenant="")
