"""The audit log's use cases (docs/security.md): record an entry, read them."""

from __future__ import annotations

import logging

from workly.audit import AuditEntry, AuditFilter
from workly.storage.contract import AuditStore

log = logging.getLogger("workly.audit")


class AuditUseCases:
    def __init__(self, audit: AuditStore) -> None:
        self._audit = audit

    async def record(self, entry: AuditEntry) -> None:
        """Store an entry; a failure is logged, never raised (the request it records was answered)."""
        try:
            await self._audit.add_audit(entry)
        except Exception as exc:
            log.error(
                "could not record audit entry %s %s (%s): %s", entry.action, entry.target, entry.outcome, exc
            )

    async def list_audit(
        self, audit_filter: AuditFilter, limit: int, before_seq: int | None
    ) -> tuple[list[AuditEntry], int | None]:
        return await self._audit.list_audit(audit_filter, limit, before_seq)
