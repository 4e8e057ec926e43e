"""The queue depth and endpoint health gauges: periodic queries in each process, never one
per scrape of /metrics."""

from __future__ import annotations

from workly.metrics import Metrics
from workly.storage.contract import QueueStore, WebhookStore


class QueueGauges:
    name = "queue depths"

    def __init__(
        self, queues: QueueStore, webhooks: WebhookStore, metrics: Metrics, every: float = 15.0
    ) -> None:
        self._queues = queues
        self._webhooks = webhooks
        self._metrics = metrics
        self._every = every

    async def interval(self) -> float:
        return self._every

    async def run(self) -> None:
        self._metrics.set_queue_depths(await self._queues.list_queues())
        self._metrics.set_endpoint_states(await self._webhooks.count_endpoints_by_state())
