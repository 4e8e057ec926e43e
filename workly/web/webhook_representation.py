"""Endpoints and events as the JSON the API answers with (and the dashboard shows)."""

from __future__ import annotations

import base64
from typing import Any

from workly.body import parse_json
from workly.event_filter import filter_json
from workly.event_types import EventType
from workly.media import is_json_type
from workly.web.representation import time_or_null
from workly.webhooks import Endpoint, Event


def endpoint_json(endpoint: Endpoint) -> dict[str, Any]:
    """Every field but the signing secret, which is write-only (GET …/secret reads it)."""
    spec, delivery, health = endpoint.spec, endpoint.spec.delivery, endpoint.health
    return {
        "id": endpoint.id,
        "url": spec.url,
        "description": spec.description,
        "event_types": None if spec.event_types is None else list(spec.event_types),
        "tenant": spec.tenant,
        "headers": spec.headers,
        "payload_format": spec.payload_format,
        "filter": None if spec.filter is None else filter_json(spec.filter.source),
        "max_concurrency": delivery.max_concurrency,
        "rate_limit": delivery.rate_limit,
        "max_attempts": delivery.max_attempts,
        "min_backoff": delivery.min_backoff,
        "max_backoff": delivery.max_backoff,
        "timeout": delivery.timeout,
        "ordering": delivery.ordering,
        "stop_on": list(delivery.stop_on),
        "deadline": delivery.deadline,
        "retention": delivery.retention,
        "enabled": endpoint.enabled,
        "health": {
            "state": health.state,
            "consecutive_failures": health.consecutive_failures,
            "failing_since": time_or_null(health.failing_since),
            "last_success_at": time_or_null(health.last_success_at),
            "disabled_reason": health.disabled_reason,
            "probe_at": time_or_null(health.probe_at),
        },
        "created_at": time_or_null(endpoint.created_at),
        "updated_at": time_or_null(endpoint.updated_at),
    }


def payload_view(content_type: str, payload: bytes) -> Any:
    """A JSON payload as JSON; null for any other (see payload_base64)."""
    if is_json_type(content_type):
        try:
            return parse_json(payload)
        except ValueError:
            return None
    return None


def event_json(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "type": event.type,
        "tenant": event.tenant,
        "key": event.key,
        "idempotency_key": event.idempotency_key,
        "payload": payload_view(event.content_type, event.payload),
        "payload_base64": base64.b64encode(event.payload).decode(),
        "run_at": time_or_null(event.run_at),
        "created_at": time_or_null(event.created_at),
        "callback_url": event.callback_url,
        "failure_callback_url": event.failure_callback_url,
        "labels": event.labels or {},
        "deliveries": [
            {
                "endpoint_id": delivery.endpoint_id,
                "task_id": delivery.task_id,
                "status": delivery.status,
                "attempts": delivery.attempts,
            }
            for delivery in event.deliveries
        ],
    }


def event_type_json(event_type: EventType) -> dict[str, Any]:
    spec = event_type.spec
    return {
        "type": event_type.type,
        "description": spec.description,
        "schema": spec.schema,
        "examples": list(spec.examples),
        "deprecated": spec.deprecated,
        "created_at": time_or_null(event_type.created_at),
        "updated_at": time_or_null(event_type.updated_at),
    }
