"""The webhook platform's use cases (docs/webhooks.md): endpoints, publishing events,
endpoint health. The events Workly publishes about itself are own_events.py's."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from datetime import datetime
from typing import Any

from workly.clock import Clock
from workly.errors import (
    EndpointDisabled,
    EndpointNotFound,
    EventNotFound,
    EventTypeNotFound,
    InvalidEndpoint,
    InvalidEventType,
    NoPublicKey,
    QueueOfEndpoint,
    TooLarge,
)
from workly.ids import new_id, new_task_id
from workly.json_text import to_json
from workly.models import QueueConfig, Task, TaskStatus, check_queue_config
from workly.reserved_names import check_client_idempotency_key
from workly.secret_box import SecretBox
from workly.service.catalogue import CatalogueUseCases
from workly.service.own_events import OwnEvents
from workly.signing import generate_secret, public_keys
from workly.storage.contract import TaskStore, WebhookStore
from workly.trace_context import parse_trace_context, stored
from workly.tracing import Tracing
from workly.webhooks import (
    ENDPOINT_PREFIX,
    JSON_PAYLOAD,
    Endpoint,
    EndpointSpec,
    Event,
    NewEvent,
    Published,
    check_subscription,
    delivery_headers,
    envelope,
    envelope_time,
)

log = logging.getLogger("workly.webhooks")
_SPEC_FIELDS = frozenset(
    {"url", "description", "event_types", "tenant", "headers", "payload_format", "filter"}
)
_DELIVERY_FIELDS = frozenset(f.name for f in fields(QueueConfig)) - {"paused"}
MANUALLY_DISABLED = "disabled by hand (API, CLI or dashboard)"
TEST_TYPE = "workly.test"
TEST_PAYLOAD = b'{"type":"workly.test"}'  # a test of a type without examples


def check_not_endpoint_queue(queue: str) -> None:
    """Queues named ep_… belong to endpoints: they change only through /v1/endpoints."""
    if queue.startswith(ENDPOINT_PREFIX):
        raise QueueOfEndpoint(queue)


class WebhookUseCases:
    def __init__(
        self,
        webhooks: WebhookStore,
        tasks: TaskStore,
        clock: Clock,
        tracing: Tracing,
        own_events: OwnEvents,
        work_available: Callable[[], None],
        catalogue: CatalogueUseCases,
        *,
        max_body_bytes: int,
        box: SecretBox | None = None,
    ) -> None:
        """``box``: how signing secrets are stored (sealed with WORKLY_SECRET_KEY, if set)."""
        self._box = box or SecretBox([])
        self._webhooks = webhooks
        self._tasks = tasks
        self._clock = clock
        self._tracing = tracing
        self._own_events = own_events
        self._work_available = work_available
        self._catalogue = catalogue
        self._max_body_bytes = max_body_bytes

    # --- endpoints -----------------------------------------------------------------
    async def create_endpoint(self, spec: EndpointSpec) -> Endpoint:
        """Store a new endpoint, enabled; a signing secret is generated when none is given."""
        await self._catalogue.check_subscription(spec.event_types)
        delivery = check_queue_config(replace(spec.delivery, paused=False))
        if delivery.signing_secret is None:
            delivery = replace(delivery, signing_secret=generate_secret())
        delivery = replace(delivery, signing_secret=self._box.seal(delivery.signing_secret))
        return await self._webhooks.create_endpoint(
            new_id("ep"), replace(spec, delivery=delivery), self._clock.now()
        )

    async def get_endpoint(self, endpoint_id: str) -> Endpoint:
        endpoint = await self._webhooks.get_endpoint(endpoint_id)
        if endpoint is None:
            raise EndpointNotFound(endpoint_id)
        return endpoint

    async def list_endpoints(
        self, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Endpoint], int | None]:
        return await self._webhooks.list_endpoints(tenant, limit, before_seq)

    async def update_endpoint(self, endpoint_id: str, changes: Mapping[str, Any]) -> Endpoint:
        """Change some fields (the endpoint's own and its delivery settings), atomically."""
        unknown = set(changes) - _SPEC_FIELDS - _DELIVERY_FIELDS
        assert not unknown, f"not endpoint fields: {unknown}"
        spec_changes = {k: v for k, v in changes.items() if k in _SPEC_FIELDS}
        delivery_changes = {k: v for k, v in changes.items() if k in _DELIVERY_FIELDS}
        if delivery_changes.get("signing_secret", "") is None:
            delivery_changes["signing_secret"] = generate_secret()  # an endpoint always signs
        if spec_changes.get("event_types") is not None:
            await self._catalogue.check_subscription(spec_changes["event_types"])

        box = self._box

        def change(current: EndpointSpec) -> EndpointSpec:
            given = replace(current.delivery, signing_secret=box.open(current.delivery.signing_secret))
            delivery = check_queue_config(replace(given, **delivery_changes))
            delivery = replace(delivery, signing_secret=box.seal(delivery.signing_secret))
            changed = replace(current, **spec_changes, delivery=delivery)
            try:
                check_subscription(changed.tenant, changed.event_types)
            except ValueError as exc:
                raise InvalidEndpoint(str(exc)) from None
            return changed

        endpoint = await self._webhooks.update_endpoint(endpoint_id, change, self._clock.now())
        if endpoint.enabled:
            self._work_available()  # more concurrency, a higher rate, a new URL
        return endpoint

    async def delete_endpoint(self, endpoint_id: str) -> None:
        await self._webhooks.delete_endpoint(endpoint_id, self._clock.now())

    async def endpoint_public_keys(self, endpoint_id: str) -> list[str]:
        """The whpk_ keys of the endpoint's whsk_ keys: what verifies its v1a signatures."""
        keys = public_keys(await self.endpoint_secret(endpoint_id))
        if not keys:
            raise NoPublicKey(f"endpoint {endpoint_id!r}")
        return keys

    async def endpoint_secret(self, endpoint_id: str) -> str:
        secret = self._box.open((await self.get_endpoint(endpoint_id)).spec.delivery.signing_secret)
        assert secret is not None, "an endpoint always has a signing secret"
        return secret

    async def enable_endpoint(self, endpoint_id: str) -> Endpoint:
        endpoint, changed = await self._webhooks.set_endpoint_enabled(
            endpoint_id, True, None, self._clock.now()
        )
        self._work_available()  # enabled, or its breaker reset: what it held may go now
        if changed:
            self._own_events.endpoint_changed(endpoint)
        return endpoint

    async def disable_endpoint(self, endpoint_id: str) -> Endpoint:
        endpoint, changed = await self._webhooks.set_endpoint_enabled(
            endpoint_id, False, MANUALLY_DISABLED, self._clock.now()
        )
        if changed:
            self._own_events.endpoint_changed(endpoint)
        return endpoint

    async def recover_endpoint(self, endpoint_id: str, since: datetime) -> int:
        """Re-enqueue the endpoint's tasks that failed at or after ``since``; how many."""
        recovered = await self._webhooks.recover_endpoint(endpoint_id, since, self._clock.now())
        if recovered:
            self._work_available()
        return recovered

    async def send_test(self, endpoint_id: str, event_type: str | None) -> Task:
        """Deliver a test event to the endpoint: the type's first example (``{"type":
        "workly.test"}`` without one), as the endpoint receives events (raw or enveloped),
        signed like any delivery; the task shows ``test: true``."""
        endpoint = await self.get_endpoint(endpoint_id)
        if not endpoint.enabled:
            raise EndpointDisabled(endpoint_id)
        if event_type == TEST_TYPE:  # the default, named
            event_type = None
        example = None if event_type is None else await self._example(event_type)
        payload = TEST_PAYLOAD if example is None else to_json(example).encode()
        now = self._clock.now()
        body = payload
        if endpoint.spec.payload_format == "envelope":
            body = envelope(event_type or TEST_TYPE, envelope_time(now), payload, JSON_PAYLOAD)
        task_id = new_task_id()
        headers = delivery_headers(endpoint.spec.headers, JSON_PAYLOAD)
        await self._webhooks.add_test_delivery(endpoint_id, task_id, body, headers, now)
        self._work_available()
        task = await self._tasks.get_task(task_id)
        assert task is not None, "stored just now"
        return task

    async def _example(self, event_type: str) -> Any | None:
        try:
            return await self._catalogue.first_example(event_type)
        except EventTypeNotFound:
            raise InvalidEventType(
                f"event type {event_type!r} is not in the catalogue: a test sends one of its examples",
                [("/type", "not in the catalogue")],
            ) from None

    async def list_endpoint_tasks(
        self, endpoint_id: str, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        await self.get_endpoint(endpoint_id)
        return await self._tasks.list_tasks(endpoint_id, status, limit, before_seq)

    # --- events --------------------------------------------------------------------
    async def publish(self, event: NewEvent) -> Published:
        """Store the event and its deliveries (one task per matching enabled endpoint) in
        one transaction; the original event when its idempotency key was used before."""
        check_client_idempotency_key(event.idempotency_key)
        limit = self._max_body_bytes
        if len(event.payload) > limit:
            size = len(event.payload)
            raise TooLarge(f"the payload is {size:,} bytes; at most {limit:,} (WORKLY_MAX_BODY_BYTES)")
        await self._catalogue.check_event(event)
        published = await self._publish(event)
        assert published is not None, "stored whether or not an endpoint takes it"
        if published.created and published.event.deliveries:
            self._work_available()
        return published

    async def _publish(self, event: NewEvent) -> Published | None:
        if not self._tracing.enabled:
            return await self._webhooks.publish(event, self._clock.now(), new_task_id)
        attributes = {"messaging.system": "workly", "workly.event.type": event.type}
        context = parse_trace_context(event.traceparent, event.tracestate)
        with self._tracing.enqueue("workly.publish", context, attributes) as span:
            traceparent, tracestate = stored(span)
            traced = replace(event, traceparent=traceparent, tracestate=tracestate)
            return await self._webhooks.publish(traced, self._clock.now(), new_task_id)

    async def get_event(self, event_id: str) -> Event:
        event = await self._webhooks.get_event(event_id)
        if event is None:
            raise EventNotFound(event_id)
        return event

    async def delete_event(self, event_id: str) -> int:
        """The event with its deliveries; how many. Not while one is being sent
        (DeliveryInFlight)."""
        return await self._webhooks.delete_event(event_id)

    async def list_events(
        self, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Event], int | None]:
        return await self._webhooks.list_events(event_type, tenant, limit, before_seq)

    async def drain_own_events(self) -> None:
        """Wait for Workly's own events in flight (published in the background)."""
        await self._own_events.drain()
