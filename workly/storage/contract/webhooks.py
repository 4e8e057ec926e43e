"""The webhook platform (workly/webhooks.py): endpoints and the events fanned out to them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from workly.webhooks import Endpoint, EndpointSpec, Event, NewEvent, Published

# A change to an endpoint, applied to the stored spec inside the writing transaction.
EndpointChange = Callable[[EndpointSpec], EndpointSpec]


class WebhookStore(Protocol):
    # --- endpoints ---------------------------------------------------------------------
    async def create_endpoint(self, endpoint_id: str, spec: EndpointSpec, now: datetime) -> Endpoint:
        """Store an endpoint with its queue (named ``endpoint_id``), enabled and healthy."""

    async def get_endpoint(self, endpoint_id: str) -> Endpoint | None: ...

    async def list_endpoints(
        self, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Endpoint], int | None]:
        """Newest first; only ``tenant``'s when given; the int continues the list."""

    async def update_endpoint(self, endpoint_id: str, change: EndpointChange, now: datetime) -> Endpoint:
        """Replace the spec with ``change(stored spec)`` atomically; a new URL also applies to
        its ready deliveries. Raises EndpointNotFound, or what ``change`` raises."""

    async def delete_endpoint(self, endpoint_id: str, now: datetime) -> None:
        """Delete the endpoint and its deliveries not yet finished; its finished deliveries
        stay (in its queue, retired: unlisted, paused) until retention removes them, and
        the queue with the last of them. Raises EndpointNotFound."""

    async def set_endpoint_enabled(
        self, endpoint_id: str, enabled: bool, reason: str | None, now: datetime
    ) -> tuple[Endpoint, bool]:
        """Enable (its breaker reset, its held tasks freed) or disable (its pending tasks
        held, ``reason`` kept). The bool: whether it changed. Raises EndpointNotFound."""

    async def recover_endpoint(self, endpoint_id: str, since: datetime, now: datetime) -> int:
        """Its tasks that failed at or after ``since`` become ready, due now, with a fresh
        attempt budget; how many. Raises EndpointNotFound."""

    async def add_test_delivery(
        self, endpoint_id: str, task_id: str, body: bytes, headers: dict[str, str], now: datetime
    ) -> None:
        """Store one delivery to the endpoint, of no event, marked ``test``, due now (held
        while its breaker is open). Raises EndpointNotFound."""

    async def count_endpoints_by_state(self) -> dict[str, int]:
        """How many endpoints are in each health state (healthy, failing, open, disabled)."""

    # --- events --------------------------------------------------------------------------
    async def publish(
        self, event: NewEvent, now: datetime, new_task_id: Callable[[], str], only_if_delivered: bool = False
    ) -> Published | None:
        """Store the event and one delivery task (ids from ``new_task_id``) per enabled
        endpoint of its tenant whose event_types match, in one transaction. An event whose
        idempotency key (per tenant) is taken stores nothing: the original comes back with
        ``created=False``. ``only_if_delivered``: an event no endpoint takes is not stored
        (None)."""

    async def get_event(self, event_id: str) -> Event | None: ...

    async def delete_event(self, event_id: str) -> int:
        """Delete the event with its deliveries (their attempts and callbacks); how many
        deliveries. Raises EventNotFound, or DeliveryInFlight while one is being sent."""

    async def list_events(
        self, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Event], int | None]:
        """Newest first, filtered by type and tenant when given."""
