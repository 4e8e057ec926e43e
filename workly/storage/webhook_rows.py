"""Endpoint, event and breaker rows ↔ domain objects, shared by both backends (as rows.py
is for tasks and queues). Each backend passes its decoders for what the dialects store
differently (times, JSON, booleans, lists)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from workly.breaker import BreakerState
from workly.errors import DeliveryInFlight
from workly.event_filter import filter_text, stored_filter
from workly.json_text import from_json
from workly.storage.rows import Decoders, Row, queue_config_from_row
from workly.webhooks import (
    JSON_PAYLOAD,
    Delivery,
    Endpoint,
    EndpointSpec,
    Event,
    Health,
    NewEvent,
    Routing,
    delivery_headers,
    envelope,
    envelope_time,
    health_state,
    is_workly_event,
)

ListDecoder = Callable[[Any], tuple[str, ...] | None]
TimeDecoder = Callable[[Any], datetime]


def endpoint_from_row(row: Row, dec: Decoders, types: ListDecoder) -> Endpoint:
    """A row of get_endpoint/list_endpoints: the endpoint joined with its breaker and its
    queue's delivery settings."""
    enabled = bool(row["enabled"])
    failures = row["consecutive_failures"] or 0
    is_open = row["position"] == "open"
    return Endpoint(
        id=row["id"],
        spec=EndpointSpec(
            url=row["url"],
            description=row["description"],
            event_types=types(row["event_types"]),
            tenant=row["tenant"],
            headers=dec.headers(row["headers"]),
            delivery=queue_config_from_row(row),
            payload_format=row["payload_format"],
            filter=None if row["filter"] is None else stored_filter(row["filter"]),
        ),
        enabled=enabled,
        health=Health(
            state=health_state(enabled, is_open, failures),
            consecutive_failures=failures,
            failing_since=_time(row["failing_since"], dec),
            last_success_at=_time(row["last_success_at"], dec),
            disabled_reason=None if enabled else row["disabled_reason"],
            probe_at=_time(row["probe_at"], dec) if is_open and enabled else None,
        ),
        created_at=dec.time(row["created_at"]),
        updated_at=dec.time(row["updated_at"]),
    )


def event_from_row(row: Row, deliveries: Sequence[Row], dec: Decoders) -> Event:
    return Event(
        id=row["id"],
        type=row["type"],
        tenant=row["tenant"],
        key=row["key"],
        idempotency_key=row["idempotency_key"],
        payload=bytes(row["payload"]),
        content_type=row["content_type"],
        run_at=dec.time(row["run_at"]),
        created_at=dec.time(row["created_at"]),
        callback_url=row["callback_url"],
        failure_callback_url=row["failure_callback_url"],
        labels=labels_from_column(row["labels"]),
        deliveries=[
            Delivery(d["endpoint_id"], d["task_id"], d["status"], d["attempts"])
            for d in deliveries
            if d["event_id"] == row["id"]
        ],
    )


def new_event(event: NewEvent, now: datetime, deliveries: Sequence[tuple[str, str]]) -> Event:
    """An event as publish just stored it, with its (endpoint id, task id) deliveries."""
    return Event(
        id=event.id,
        type=event.type,
        tenant=event.tenant,
        key=event.key,
        idempotency_key=event.idempotency_key,
        payload=event.payload,
        content_type=event.content_type,
        run_at=(event.run_at or now).astimezone(UTC),
        created_at=now,
        callback_url=event.callback_url,
        failure_callback_url=event.failure_callback_url,
        labels=event.labels,
        deliveries=[Delivery(endpoint_id, task_id, "ready", 0) for endpoint_id, task_id in deliveries],
    )


def breaker_from_row(row: Row, dec: Decoders) -> BreakerState:
    return BreakerState(
        position=row["position"],
        consecutive_failures=row["consecutive_failures"],
        failing_since=_time(row["failing_since"], dec),
        last_success_at=_time(row["last_success_at"], dec),
        probe_at=_time(row["probe_at"], dec),
        probe_seq=row["probe_seq"],
        cooldown=row["cooldown"],
    )


def breaker_params(key: str, state: BreakerState, encode_time: Callable[[datetime], Any]) -> dict[str, Any]:
    def time(value: datetime | None) -> Any:
        return None if value is None else encode_time(value)

    return {
        "key": key,
        "position": state.position,
        "consecutive_failures": state.consecutive_failures,
        "failing_since": time(state.failing_since),
        "last_success_at": time(state.last_success_at),
        "probe_at": time(state.probe_at),
        "probe_seq": state.probe_seq,
        "cooldown": state.cooldown,
    }


def _time(value: Any, dec: Decoders) -> datetime | None:
    return None if value is None else dec.time(value)


def endpoint_params(
    endpoint_id: str, spec: EndpointSpec, now: Any, event_types: Any, headers: Any
) -> dict[str, Any]:
    """insert_endpoint's and update_endpoint's parameters; times, lists and JSON encoded
    by the backend."""
    return {
        "id": endpoint_id,
        "url": spec.url,
        "description": spec.description,
        "event_types": event_types,
        "tenant": spec.tenant,
        "headers": headers,
        "now": now,
        "payload_format": spec.payload_format,
        "filter": None if spec.filter is None else filter_text(spec.filter),
        "filter_path": None if spec.filter is None else spec.filter.jsonpath,
    }


def event_params(event: NewEvent, now: Any, run_at: Any, labels: Any) -> dict[str, Any]:
    """publish_event's parameters; ``labels`` encoded by the backend."""
    return {
        "id": event.id,
        "type": event.type,
        "tenant": event.tenant,
        "key": event.key,
        "idempotency_key": event.idempotency_key,
        "payload": event.payload,
        "content_type": event.content_type,
        "run_at": run_at,
        "now": now,
        "callback_url": event.callback_url,
        "failure_callback_url": event.failure_callback_url,
        "labels": labels,
    }


def labels_from_column(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    return dict(from_json(value) if isinstance(value, str | bytes) else value)


def route(event: NewEvent, targets: Sequence[Row], types: ListDecoder) -> list[Row]:
    """The publish targets (enabled endpoints of the event's tenant) that take the event."""
    routing = event.routing()
    return [row for row in targets if routing.takes(types(row["event_types"]), row["filter"])]


def wraps(target: Row, event_type: str) -> bool:
    """Whether a delivery of this type to this endpoint goes enveloped: its payload_format
    says so, and the event is not one of Workly's own (already ``{type, timestamp, data}``)."""
    return target["payload_format"] == "envelope" and not is_workly_event(event_type)


def target_headers(target: Row, event_type: str, content_type: str, dec: Decoders) -> dict[str, str]:
    """What a delivery to ``target`` carries: its headers, and the content-type of what is
    sent (an envelope is JSON, whatever the payload)."""
    sent_as = JSON_PAYLOAD if wraps(target, event_type) else content_type
    return delivery_headers(dec.headers(target["headers"]), sent_as)


def enveloped(event: NewEvent, targets: Sequence[Row], now: datetime) -> bytes | None:
    """The envelope the targets with ``payload_format: envelope`` get (None: none has it)."""
    if not any(wraps(row, event.type) for row in targets):
        return None
    return envelope(event.type, envelope_time(now), event.payload, event.content_type)


def replayed(
    events: Sequence[Row], endpoint: Row, dec: Decoders, types: ListDecoder
) -> list[tuple[str, bytes, dict[str, str]]]:
    """Of a replay chunk's events, those the endpoint takes now (its types and filter), each
    with the body and headers its delivery carries (an envelope's timestamp: the event's
    creation, as at its publish)."""
    patterns = types(endpoint["event_types"])
    taken = []
    for row in events:
        labels = labels_from_column(row["labels"])
        payload, content_type = bytes(row["payload"]), row["content_type"]
        routing = Routing(row["type"], row["tenant"], labels, payload, content_type)
        if not routing.takes(patterns, endpoint["filter"]):
            continue
        body = payload
        if wraps(endpoint, row["type"]):
            body = envelope(row["type"], envelope_time(dec.time(row["created_at"])), payload, content_type)
        taken.append((row["id"], body, target_headers(endpoint, row["type"], content_type, dec)))
    return taken


def check_none_running(event_id: str, deliveries: Sequence[Row]) -> None:
    """An event is not deleted while one of its deliveries is being sent."""
    for delivery in deliveries:
        if delivery["status"] == "running":
            raise DeliveryInFlight(event_id, delivery["id"])
