"""The event catalogue (workly/event_types.py) and the settings every process shares."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from workly.event_types import EventType, EventTypeSpec

EventTypeChange = Callable[[EventTypeSpec], EventTypeSpec]


class CatalogueStore(Protocol):
    async def put_event_type(
        self, event_type: str, spec: EventTypeSpec, now: datetime
    ) -> tuple[EventType, bool]:
        """Create or replace (its version raised); whether it was created."""

    async def update_event_type(self, event_type: str, change: EventTypeChange, now: datetime) -> EventType:
        """Replace the spec with ``change(stored spec)`` atomically, raising the version.
        Raises EventTypeNotFound, or what ``change`` raises."""

    async def get_event_type(self, event_type: str) -> EventType | None: ...

    async def list_event_types(
        self, include_deprecated: bool, limit: int, before_seq: int | None
    ) -> tuple[list[EventType], int | None]:
        """Newest first; the int continues the list."""

    async def delete_event_type(self, event_type: str) -> None:
        """Raises EventTypeNotFound."""

    async def catalogue_types(self) -> list[str]:
        """Every type in the catalogue, deprecated ones included."""

    async def put_setting(self, name: str, value: str) -> str | None:
        """Record a setting the SQL functions read (WORKLY_EVENT_TYPES: ``event_types``); the
        value it had (None: none)."""
