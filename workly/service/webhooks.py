"""The webhook platform's use cases: endpoints, publishing events, endpoint health, and
the events Workly publishes about itself (``workly.*``).

A part of Service (``class Service(WebhookUseCases)``): the methods use its storage,
clock, settings and work_available hook. See docs/webhooks.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any

from workly.errors import (
    EndpointNotFound,
    EventNotFound,
    InvalidEndpoint,
    NoPublicKey,
    QueueOfEndpoint,
    StorageConflict,
    TooLarge,
)
from workly.ids import new_id, new_task_id
from workly.models import AttemptResult, QueueConfig, RecordSummary, Task, TaskStatus, check_queue_config
from workly.service.part import ServicePart
from workly.signing import generate_secret, public_keys
from workly.trace_context import parse_trace_context, stored
from workly.webhooks import (
    Endpoint,
    EndpointSpec,
    Event,
    NewEvent,
    Published,
    check_subscription,
    is_workly_event,
)

log = logging.getLogger("workly.webhooks")
ENDPOINT_PREFIX = "ep_"
_SPEC_FIELDS = frozenset({"url", "description", "event_types", "tenant", "headers"})
_DELIVERY_FIELDS = frozenset(f.name for f in fields(QueueConfig)) - {"paused"}
MANUALLY_DISABLED = "disabled by hand (API, CLI or dashboard)"


def check_not_endpoint_queue(queue: str) -> None:
    """Queues named ep_… belong to endpoints: they change only through /v1/endpoints."""
    if queue.startswith(ENDPOINT_PREFIX):
        raise QueueOfEndpoint(queue)


class WebhookUseCases(ServicePart):
    _own_events: set[asyncio.Task[None]]

    def _callbacks_wake(self) -> None:
        raise NotImplementedError

    # --- endpoints -----------------------------------------------------------------
    async def create_endpoint(self, spec: EndpointSpec) -> Endpoint:
        """Store a new endpoint, enabled; a signing secret is generated when none is given."""
        delivery = check_queue_config(replace(spec.delivery, paused=False))
        if delivery.signing_secret is None:
            delivery = replace(delivery, signing_secret=generate_secret())
        return await self._storage().create_endpoint(
            new_id("ep"), replace(spec, delivery=delivery), self.now()
        )

    async def get_endpoint(self, endpoint_id: str) -> Endpoint:
        endpoint = await self._storage().get_endpoint(endpoint_id)
        if endpoint is None:
            raise EndpointNotFound(endpoint_id)
        return endpoint

    async def list_endpoints(
        self, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Endpoint], int | None]:
        return await self._storage().list_endpoints(tenant, limit, before_seq)

    async def update_endpoint(self, endpoint_id: str, changes: Mapping[str, Any]) -> Endpoint:
        """Change some fields (the endpoint's own and its delivery settings), atomically."""
        unknown = set(changes) - _SPEC_FIELDS - _DELIVERY_FIELDS
        assert not unknown, f"not endpoint fields: {unknown}"
        spec_changes = {k: v for k, v in changes.items() if k in _SPEC_FIELDS}
        delivery_changes = {k: v for k, v in changes.items() if k in _DELIVERY_FIELDS}
        if delivery_changes.get("signing_secret", "") is None:
            delivery_changes["signing_secret"] = generate_secret()  # an endpoint always signs

        def change(current: EndpointSpec) -> EndpointSpec:
            delivery = check_queue_config(replace(current.delivery, **delivery_changes))
            changed = replace(current, **spec_changes, delivery=delivery)
            try:
                check_subscription(changed.tenant, changed.event_types)
            except ValueError as exc:
                raise InvalidEndpoint(str(exc)) from None
            return changed

        endpoint = await self._storage().update_endpoint(endpoint_id, change, self.now())
        if endpoint.enabled:
            self.work_available()  # more concurrency, a higher rate, a new URL
        return endpoint

    async def delete_endpoint(self, endpoint_id: str) -> None:
        await self._storage().delete_endpoint(endpoint_id)

    async def endpoint_public_keys(self, endpoint_id: str) -> list[str]:
        """The whpk_ keys of the endpoint's whsk_ keys: what verifies its v1a signatures."""
        keys = public_keys(await self.endpoint_secret(endpoint_id))
        if not keys:
            raise NoPublicKey(f"endpoint {endpoint_id!r}")
        return keys

    async def endpoint_secret(self, endpoint_id: str) -> str:
        secret = (await self.get_endpoint(endpoint_id)).spec.delivery.signing_secret
        assert secret is not None, "an endpoint always has a signing secret"
        return secret

    async def enable_endpoint(self, endpoint_id: str) -> Endpoint:
        endpoint, changed = await self._storage().set_endpoint_enabled(endpoint_id, True, None, self.now())
        self.work_available()  # enabled, or its breaker reset: what it held may go now
        if changed:
            self._announce("workly.endpoint.enabled", _endpoint_data(endpoint))
        return endpoint

    async def disable_endpoint(self, endpoint_id: str) -> Endpoint:
        endpoint, changed = await self._storage().set_endpoint_enabled(
            endpoint_id, False, MANUALLY_DISABLED, self.now()
        )
        if changed:
            self._announce("workly.endpoint.disabled", _endpoint_data(endpoint))
        return endpoint

    async def recover_endpoint(self, endpoint_id: str, since: datetime) -> int:
        """Re-enqueue the endpoint's tasks that failed at or after ``since``; how many."""
        recovered = await self._storage().recover_endpoint(endpoint_id, since, self.now())
        if recovered:
            self.work_available()
        return recovered

    async def list_endpoint_tasks(
        self, endpoint_id: str, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        await self.get_endpoint(endpoint_id)
        return await self._storage().list_tasks(endpoint_id, status, limit, before_seq)

    # --- events --------------------------------------------------------------------
    async def publish(self, event: NewEvent) -> Published:
        """Store the event and its deliveries (one task per matching enabled endpoint) in
        one transaction; the original event when its idempotency key was used before."""
        limit = self.settings.max_body_bytes
        if len(event.payload) > limit:
            size = len(event.payload)
            raise TooLarge(f"the payload is {size:,} bytes; at most {limit:,} (WORKLY_MAX_BODY_BYTES)")
        published = await self._publish(event)
        assert published is not None, "stored whether or not an endpoint takes it"
        if published.created and published.event.deliveries:
            self.work_available()
        return published

    async def _publish(self, event: NewEvent) -> Published | None:
        if not self.tracing.enabled:
            return await self._storage().publish(event, self.now(), new_task_id)
        attributes = {"messaging.system": "workly", "workly.event.type": event.type}
        context = parse_trace_context(event.traceparent, event.tracestate)
        with self.tracing.enqueue("workly.publish", context, attributes) as span:
            traceparent, tracestate = stored(span)
            traced = replace(event, traceparent=traceparent, tracestate=tracestate)
            return await self._storage().publish(traced, self.now(), new_task_id)

    async def get_event(self, event_id: str) -> Event:
        event = await self._storage().get_event(event_id)
        if event is None:
            raise EventNotFound(event_id)
        return event

    async def list_events(
        self, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Event], int | None]:
        return await self._storage().list_events(event_type, tenant, limit, before_seq)

    # --- Workly's own events ---------------------------------------------------------
    def on_recorded(self, results: Sequence[AttemptResult], summary: RecordSummary) -> None:
        """After each batch of attempt results: freed tasks are claimable now; endpoints
        the results disabled and tasks that failed for good are announced as events."""
        if summary.released:
            self.work_available()
        if any(r.has_callback and r.outcome != "retry" for r in results):
            self._callbacks_wake()
        for endpoint_id, _reason in summary.disabled:
            self._spawn(self._announce_disabled(endpoint_id))
        failed = [r for r in results if r.outcome == "failed"]
        if failed:
            self._spawn(self._announce_failures(failed))

    async def _announce_disabled(self, endpoint_id: str) -> None:
        endpoint = await self._storage().get_endpoint(endpoint_id)
        if endpoint is not None:
            await self._publish_own("workly.endpoint.disabled", _endpoint_data(endpoint))

    async def _announce_failures(self, failed: Sequence[AttemptResult]) -> None:
        storage = self._storage()
        for result in failed:
            task = await storage.get_task(result.task_id)
            if task is None or task.status != "failed":  # a stale result, or redriven since
                continue
            if task.event_id is not None:
                # Never about Workly's own events: a failing subscriber's failure notices
                # would make more failure notices, without end.
                event = await storage.get_event(task.event_id)
                if event is None or is_workly_event(event.type):
                    continue
            await self._publish_own(
                "workly.task.failed", {"task": _task_data(task), "attempt": _attempt_data(result)}
            )

    def _announce(self, event_type: str, data: dict[str, Any]) -> None:
        self._spawn(self._publish_own(event_type, data))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._own_events.add(task)
        task.add_done_callback(self._own_event_done)

    def _own_event_done(self, task: asyncio.Task[None]) -> None:
        self._own_events.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("could not publish one of Workly's own events: %s", task.exception())

    async def _publish_own(self, event_type: str, data: dict[str, Any]) -> None:
        payload = {"type": event_type, "timestamp": _rfc3339(self.now()), "data": data}
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        # Stored only when an endpoint takes it: an outage with nobody subscribed must not
        # fill the events table with notices no one reads.
        event = NewEvent(id=new_id("evt"), type=event_type, payload=body, content_type="application/json")
        try:
            published = await self._storage().publish(event, self.now(), new_task_id, only_if_delivered=True)
        except StorageConflict:
            # A subscriber deleted between reading the subscribers and storing the deliveries
            # (the same event id: a retry stores it at most once).
            published = await self._storage().publish(event, self.now(), new_task_id, only_if_delivered=True)
        if published is not None:
            self.work_available()

    async def drain_own_events(self) -> None:
        """Wait for the announcements in flight (the service is stopping)."""
        while self._own_events:
            await asyncio.gather(*list(self._own_events), return_exceptions=True)


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _endpoint_data(endpoint: Endpoint) -> dict[str, Any]:
    spec, health = endpoint.spec, endpoint.health
    return {
        "id": endpoint.id,
        "url": spec.url,
        "description": spec.description,
        "tenant": spec.tenant,
        "event_types": None if spec.event_types is None else list(spec.event_types),
        "enabled": endpoint.enabled,
        "health": {
            "state": health.state,
            "consecutive_failures": health.consecutive_failures,
            "disabled_reason": health.disabled_reason,
        },
    }


def _task_data(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "queue": task.queue,
        "url": task.url,
        "method": task.method,
        "status": task.status,
        "attempts": task.attempts,
        "max_attempts": task.max_attempts,
        "event_id": task.event_id,
        "endpoint_id": task.endpoint_id,
        "last_status_code": task.last_status_code,
        "last_error": task.last_error,
        "created_at": _rfc3339(task.created_at),
    }


def _attempt_data(result: AttemptResult) -> dict[str, Any]:
    return {
        "attempt": result.attempt,
        "started_at": _rfc3339(result.started_at),
        "finished_at": _rfc3339(result.finished_at),
        "status_code": result.status_code,
        "error": result.error,
    }
