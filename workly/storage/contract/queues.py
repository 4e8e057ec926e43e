"""Queues and their configuration."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from workly.models import Queue, QueueChange, QueueConfig


class QueueStore(Protocol):
    async def get_queue(self, name: str) -> Queue | None: ...

    async def list_queues(self) -> list[Queue]: ...

    async def put_queue(self, name: str, config: QueueConfig, now: datetime) -> tuple[Queue, bool]:
        """Create or replace a queue's config; the bool is True when it was created."""

    async def update_queue(self, name: str, change: QueueChange, now: datetime) -> Queue:
        """Replace the config with ``change(stored config)``, atomically: the queue row is
        locked from the read to the write. Raises QueueNotFound, or what ``change`` raises."""

    async def delete_queue(self, name: str) -> None:
        """Delete a queue with its tasks and their attempts. Raises QueueNotFound."""

    async def purge_queue(self, name: str) -> int:
        """Delete a queue's ready tasks; return how many. Raises QueueNotFound."""
