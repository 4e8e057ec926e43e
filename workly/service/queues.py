"""Queues' use cases (docs/queues.md): read, configure, pause, resume, purge, delete, and
what the dashboard shows of their deliveries.

A part of Service (``class Service(…, QueueUseCases)``): the methods use its storage, clock,
signer, delivery history and work_available hook.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from workly.delivery_stats import MinuteStats, Scope
from workly.errors import NoPublicKey, QueueNotFound
from workly.models import Queue, QueueConfig, check_queue_config
from workly.service.delivery_history import DeliveryHistory
from workly.service.part import ServicePart
from workly.service.webhooks import check_not_endpoint_queue
from workly.signing import Signer, public_keys


class QueueUseCases(ServicePart):
    _signer: Signer

    def _history(self) -> DeliveryHistory:
        raise NotImplementedError

    async def get_queue(self, name: str) -> Queue:
        queue = await self._storage().get_queue(name)
        if queue is None:
            raise QueueNotFound(name)
        return queue

    async def queue_public_keys(self, name: str) -> list[str]:
        """The whpk_ keys that verify the v1a signatures of the queue's deliveries: those of
        its own signing secret, or of WORKLY_SIGNING_SECRET when it has none."""
        own = (await self.get_queue(name)).config.signing_secret
        keys = self._signer.public_keys if own is None else public_keys(own)
        if not keys:
            raise NoPublicKey(f"queue {name!r}")
        return keys

    async def list_queues(self) -> list[Queue]:
        return await self._storage().list_queues()

    async def delivery_history(self, scope: Scope, name: str, minutes: int = 60) -> list[MinuteStats]:
        """Per minute of the last ``minutes``, the attempts of a queue's or an endpoint's
        deliveries: succeeded, retried, failed, and their durations (the dashboard's charts)."""
        return await self._history().last_minutes(scope, name, minutes)

    async def delivered_in_last(self, window: timedelta) -> dict[str, int]:
        """Per queue, about how many tasks succeeded within ``window``, up to a minute (the
        dashboard's throughput, from the delivery history)."""
        return await self._history().succeeded_in_last(window)

    async def put_queue(self, name: str, config: QueueConfig) -> tuple[Queue, bool]:
        """Create or replace a queue's config; True when it was created."""
        check_not_endpoint_queue(name)
        stored = await self._storage().put_queue(name, check_queue_config(config), self.now())
        self.work_available()  # more concurrency, a higher rate, or unpaused
        return stored

    async def update_queue(self, name: str, changes: Mapping[str, Any]) -> Queue:
        """Change some config fields, atomically against concurrent changes."""

        def change(current: QueueConfig) -> QueueConfig:
            return check_queue_config(replace(current, **changes))

        check_not_endpoint_queue(name)
        queue = await self._storage().update_queue(name, change, self.now())
        if not queue.config.paused:
            self.work_available()
        return queue

    async def pause_queue(self, name: str) -> Queue:
        return await self.update_queue(name, {"paused": True})

    async def resume_queue(self, name: str) -> Queue:
        return await self.update_queue(name, {"paused": False})

    async def delete_queue(self, name: str) -> None:
        check_not_endpoint_queue(name)
        await self._storage().delete_queue(name)

    async def purge_queue(self, name: str) -> int:
        """Delete the queue's ready tasks; how many."""
        check_not_endpoint_queue(name)
        return await self._storage().purge_queue(name)
