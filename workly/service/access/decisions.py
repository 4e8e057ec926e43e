"""One request's access decisions, and what it tells the audit log.

Every adapter's call goes through ``ScopedService`` (this package), built for the request's
``Principal``; each of its use cases asks ``Access`` here before (or, for an object of
some tenant, right after reading) the object. The rules (DESIGN.md "Tenants, API keys,
audit log"):

- a role lacking the permission: 403 (``PermissionDenied``);
- a tenant-scoped principal asking for anything not of its tenant: 404, as if it did not
  exist, checked before the role (404 wins);
- what a tenant-scoped principal creates is its tenant's; naming another tenant: 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workly.access import Permission, Principal
from workly.audit import redacted
from workly.errors import OutOfScope, PermissionDenied


@dataclass(slots=True)
class AuditNote:
    """What the use case a request called says about itself, for its audit entry
    (workly/web/audit_trail.py writes it once the answer's status is known)."""

    action: str | None = None  # "endpoint.update"
    target: str | None = None  # "ep_…"
    tenant: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)


class Access:
    def __init__(self, principal: Principal, note: AuditNote | None = None) -> None:
        self.principal = principal
        self.note = note or AuditNote()

    @property
    def tenant(self) -> str | None:
        """The tenant the principal is scoped to (None: every object)."""
        return self.principal.tenant

    def act(
        self,
        action: str,
        permission: Permission,
        target: str | None = None,
        tenant: str | None = None,
        changes: Mapping[str, Any] | None = None,
    ) -> None:
        """Note the call, then refuse it (403) unless the role has ``permission``."""
        note = self.note
        note.action, note.target, note.tenant = action, target, tenant if tenant is not None else self.tenant
        if changes:
            note.changes = redacted(changes)
        if not self.principal.can(permission):
            raise PermissionDenied(self.principal.role, permission, action)

    def untenanted(self, what: str) -> None:
        """Objects of no tenant (queues, plain tasks, schedules, operations, keys, the audit
        log) do not exist for a tenant-scoped principal."""
        if self.tenant is not None:
            raise OutOfScope(what)

    def see(self, tenant: str | None, not_found: Exception) -> None:
        """An object of ``tenant``, read: ``not_found`` unless the principal sees it."""
        if self.tenant is not None and tenant != self.tenant:
            raise not_found

    def owner(self, given: str | None, action: str) -> str | None:
        """The tenant what is created belongs to: the principal's own, whatever the body
        left out; a body naming another tenant is refused (403)."""
        if self.tenant is None:
            return given
        if given is not None and given != self.tenant:
            detail = f"this key is scoped to tenant {self.tenant!r}: it cannot {action} for tenant {given!r}"
            raise PermissionDenied(self.principal.role, "tenant", action, detail)
        return self.tenant

    def keep_tenant(self, new: str | None, action: str) -> None:
        """A change of an object's tenant: a tenant-scoped principal cannot move it to another
        tenant, nor out of every tenant (403)."""
        if self.tenant is not None and new != self.tenant:
            whose = "no tenant" if new is None else f"tenant {new!r}"
            detail = f"this key is scoped to tenant {self.tenant!r}: it cannot give an object to {whose}"
            raise PermissionDenied(self.principal.role, "tenant", action, detail)

    def listed_tenant(self, asked: str | None) -> tuple[str | None, bool]:
        """The tenant filter of a list, and whether it can find anything: a tenant-scoped
        principal lists its own tenant's objects only."""
        if self.tenant is None:
            return asked, True
        return self.tenant, asked is None or asked == self.tenant
