"""Queues' use cases (docs/queues.md): read, configure, pause, resume, purge, delete, and
what the dashboard shows of their deliveries."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from workly.clock import Clock
from workly.delivery_stats import MinuteStats, Scope
from workly.errors import NoPublicKey, QueueNotFound
from workly.models import Queue, QueueConfig, check_queue_config
from workly.secret_box import SecretBox
from workly.service.delivery_history import DeliveryHistory
from workly.service.webhooks import check_not_endpoint_queue
from workly.signing import Signer, public_keys
from workly.storage.contract import QueueStore


class QueueUseCases:
    def __init__(
        self,
        queues: QueueStore,
        history: DeliveryHistory,
        signer: Signer,
        clock: Clock,
        work_available: Callable[[], None],
        box: SecretBox | None = None,
    ) -> None:
        """``box``: how signing secrets are stored (sealed with WORKLY_SECRET_KEY, if set)."""
        self._queues = queues
        self._history = history
        self._signer = signer
        self._clock = clock
        self._work_available = work_available
        self._box = box or SecretBox([])

    async def get_queue(self, name: str) -> Queue:
        queue = await self._queues.get_queue(name)
        if queue is None:
            raise QueueNotFound(name)
        return queue

    async def queue_public_keys(self, name: str) -> list[str]:
        """The whpk_ keys that verify the v1a signatures of the queue's deliveries: those of
        its own signing secret, or of WORKLY_SIGNING_SECRET when it has none."""
        own = self._box.open((await self.get_queue(name)).config.signing_secret)
        keys = self._signer.public_keys if own is None else public_keys(own)
        if not keys:
            raise NoPublicKey(f"queue {name!r}")
        return keys

    async def list_queues(self) -> list[Queue]:
        return await self._queues.list_queues()

    async def delivery_history(self, scope: Scope, name: str, minutes: int = 60) -> list[MinuteStats]:
        """Per minute of the last ``minutes``, the attempts of a queue's or an endpoint's
        deliveries: succeeded, retried, failed, and their durations (the dashboard's charts)."""
        return await self._history.last_minutes(scope, name, minutes)

    async def delivered_in_last(self, window: timedelta) -> dict[str, int]:
        """Per queue, about how many tasks succeeded within ``window``, up to a minute (the
        dashboard's throughput, from the delivery history)."""
        return await self._history.succeeded_in_last(window)

    async def put_queue(self, name: str, config: QueueConfig) -> tuple[Queue, bool]:
        """Create or replace a queue's config; True when it was created."""
        check_not_endpoint_queue(name)
        checked = check_queue_config(config)
        sealed = replace(checked, signing_secret=self._box.seal(checked.signing_secret))
        stored = await self._queues.put_queue(name, sealed, self._clock.now())
        self._work_available()  # more concurrency, a higher rate, or unpaused
        return stored

    async def update_queue(self, name: str, changes: Mapping[str, Any]) -> Queue:
        """Change some config fields, atomically against concurrent changes."""

        box = self._box

        def change(current: QueueConfig) -> QueueConfig:
            given = replace(current, signing_secret=box.open(current.signing_secret))
            changed = check_queue_config(replace(given, **changes))
            return replace(changed, signing_secret=box.seal(changed.signing_secret))

        check_not_endpoint_queue(name)
        queue = await self._queues.update_queue(name, change, self._clock.now())
        if not queue.config.paused:
            self._work_available()
        return queue

    async def pause_queue(self, name: str) -> Queue:
        return await self.update_queue(name, {"paused": True})

    async def resume_queue(self, name: str) -> Queue:
        return await self.update_queue(name, {"paused": False})

    async def delete_queue(self, name: str) -> None:
        check_not_endpoint_queue(name)
        await self._queues.delete_queue(name)

    async def reseal_secrets(self) -> int:
        """Store every queue's and endpoint's signing secret sealed with the first key of
        WORKLY_SECRET_KEY (`workly secret-key reseal`: after a key is added or rotated); how
        many were written. Each is changed atomically, as update_queue changes one."""
        box, resealed = self._box, 0
        for queue in await self._queues.list_queues():
            if box.current(queue.config.signing_secret):
                continue  # none, or sealed with the first key already

            def reseal(config: QueueConfig) -> QueueConfig:
                return replace(config, signing_secret=box.reseal(config.signing_secret))

            await self._queues.update_queue(queue.name, reseal, self._clock.now())
            resealed += 1
        return resealed

    async def purge_queue(self, name: str) -> int:
        """Delete the queue's ready tasks; how many."""
        check_not_endpoint_queue(name)
        return await self._queues.purge_queue(name)
