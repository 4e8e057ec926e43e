"""What the parts of Service (its mixins of use cases: queues.py, webhooks.py, failures.py,
schedules.py) use of it. Service provides each; a part declares only the hooks of its own."""

from __future__ import annotations

from datetime import datetime

from workly.config import Settings
from workly.metrics import Metrics
from workly.storage.base import Storage
from workly.tracing import Tracing


class ServicePart:
    settings: Settings
    metrics: Metrics
    tracing: Tracing

    def _storage(self) -> Storage:
        raise NotImplementedError

    def now(self) -> datetime:
        raise NotImplementedError

    def work_available(self) -> None:
        raise NotImplementedError
