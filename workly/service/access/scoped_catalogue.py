"""The event catalogue's use cases as one principal may call them: every key reads the
catalogue (a tenant's too: its endpoints subscribe to these types); only an untenanted key
with the write permission changes it; a tenant's key is refused (403: what it reads, it
knows exists)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from workly.errors import PermissionDenied
from workly.event_types import EventType, EventTypeSpec
from workly.service.access.decisions import Access
from workly.service.catalogue import CatalogueUseCases


class ScopedCatalogue:
    def __init__(self, catalogue: CatalogueUseCases, access: Access) -> None:
        self._catalogue = catalogue
        self._access = access

    def _change(self, action: str, event_type: str, changes: Mapping[str, Any] | None = None) -> None:
        access = self._access
        access.act(action, "write", event_type, changes=None if changes is None else _audited(changes))
        if access.tenant is not None:
            detail = (
                f"a key scoped to tenant {access.tenant!r} reads the event catalogue but cannot change it"
            )
            raise PermissionDenied(access.principal.role, "write", action, detail)

    async def put_event_type(self, event_type: str, spec: EventTypeSpec) -> tuple[EventType, bool]:
        self._change("event_type.put", event_type, asdict(spec))
        return await self._catalogue.put_event_type(event_type, spec)

    async def update_event_type(self, event_type: str, changes: Mapping[str, Any]) -> EventType:
        self._change("event_type.update", event_type, changes)
        return await self._catalogue.update_event_type(event_type, changes)

    async def delete_event_type(self, event_type: str) -> None:
        self._change("event_type.delete", event_type)
        await self._catalogue.delete_event_type(event_type)

    async def get_event_type(self, event_type: str) -> EventType:
        self._access.act("event_type.read", "read", event_type)
        return await self._catalogue.get_event_type(event_type)

    async def list_event_types(
        self, include_deprecated: bool, limit: int, before_seq: int | None
    ) -> tuple[list[EventType], int | None]:
        self._access.act("event_type.list", "read")
        return await self._catalogue.list_event_types(include_deprecated, limit, before_seq)


def _audited(changes: Mapping[str, Any]) -> dict[str, Any]:
    """What an audit entry records of a change: the schema and examples are documents, not
    settings (they are read back from the catalogue); whether they changed is what counts."""
    shown = {k: v for k, v in changes.items() if k not in ("schema", "examples")}
    for name in ("schema", "examples"):
        if name in changes:
            shown[name] = "(changed)"
    return shown
