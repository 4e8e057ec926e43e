"""The webhook platform's domain: endpoints, events, and which endpoints an event reaches.

An endpoint delivers through a queue of its own, named after its id: that queue holds its
delivery settings (concurrency, rate limit, retries, ordering, signing secrets) and its
``paused`` flag is the endpoint's ``enabled`` turned around, so every queue rule applies to
an endpoint through the one claim. Pure types and rules; storage keeps them, the service
applies them (docs/webhooks.md).
"""

from __future__ import annotations

import base64
import functools
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlsplit

from workly.event_filter import EventFilter, filter_document, stored_filter
from workly.json_text import to_json
from workly.models import QueueConfig, TaskStatus
from workly.request_rules import plain_origin

ENDPOINT_PREFIX = "ep_"  # an endpoint's id, and the name of its queue

# An event type: dot-separated words such as "invoice.paid" or "workly.task.failed".
EVENT_TYPE = r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*"
_EVENT_TYPE = re.compile(EVENT_TYPE)
MAX_EVENT_TYPE = 128
MAX_EVENT_TYPES = 100
WORKLY_EVENT_PREFIX = "workly."
HealthState = Literal["healthy", "failing", "open", "disabled"]
JSON_PAYLOAD = "application/json"  # the content type of a JSON payload (else: payload_base64's bytes)
PayloadFormat = Literal["raw", "envelope"]
PAYLOAD_FORMATS: tuple[PayloadFormat, ...] = ("raw", "envelope")
MAX_LABELS = 10
LABEL_KEY = r"[A-Za-z0-9_-]{1,64}"
_LABEL_KEY = re.compile(LABEL_KEY)
MAX_LABEL_VALUE = 256
HEALTH_STATES: tuple[HealthState, ...] = ("healthy", "failing", "open", "disabled")


def check_event_type(value: str) -> str:
    """An event type as published: dot-separated words of letters, digits, '_' and '-'."""
    if len(value) > MAX_EVENT_TYPE or not _EVENT_TYPE.fullmatch(value):
        raise ValueError(
            f"event type {value!r} must be dot-separated words of letters, digits, '_' or '-' "
            f"(at most {MAX_EVENT_TYPE} characters), such as invoice.paid"
        )
    return value


def is_workly_event(event_type: str) -> bool:
    return event_type.startswith(WORKLY_EVENT_PREFIX)


def check_published_type(value: str) -> str:
    """An event type a client may publish: ``workly.*`` is Workly's own."""
    check_event_type(value)
    if is_workly_event(value):
        raise ValueError("event types starting with 'workly.' are Workly's own; choose another prefix")
    return value


def check_event_pattern(value: str) -> str:
    """A subscription: an exact type (``invoice.paid``) or a prefix (``invoice.*``)."""
    exact = value.removesuffix(".*")
    if len(value) > MAX_EVENT_TYPE or not _EVENT_TYPE.fullmatch(exact):
        raise ValueError(
            f"event type pattern {value!r} must be an exact type such as invoice.paid or a prefix "
            "such as invoice.* (use null for every type)"
        )
    return value


def check_event_patterns(values: list[str]) -> list[str]:
    if not values:
        raise ValueError("event_types must name at least one type or pattern (null: every type)")
    if len(values) > MAX_EVENT_TYPES:
        raise ValueError(f"at most {MAX_EVENT_TYPES} event types")
    for value in values:
        check_event_pattern(value)
    return list(dict.fromkeys(values))


def check_subscription(tenant: str | None, patterns: tuple[str, ...] | list[str] | None) -> None:
    """Workly's own events are untenanted: an endpoint of a tenant subscribing to them would
    wait for them in vain."""
    if tenant is not None and patterns is not None:
        for pattern in patterns:
            if is_workly_event(pattern) or pattern == "workly.*":
                raise ValueError(
                    f"event type pattern {pattern!r}: Workly's own events are untenanted and reach "
                    "only endpoints without a tenant"
                )


def matches(patterns: tuple[str, ...] | None, event_type: str) -> bool:
    """Whether an endpoint subscribed to ``patterns`` receives ``event_type``. None is every
    type but Workly's own (``workly.*`` tells of other endpoints: only an endpoint that
    names it gets it); ``invoice.*`` is every type that starts with ``invoice.`` (at any
    depth)."""
    if patterns is None:
        return not is_workly_event(event_type)
    for pattern in patterns:
        if pattern.endswith(".*"):
            if event_type.startswith(pattern[:-1]):
                return True
        elif pattern == event_type:
            return True
    return False


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """An event's labels: at most 10 pairs, keys of letters, digits, '_' and '-' (a filter
    names them as ``labels.<key>``), string values of at most 256 characters."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels")
    for key, value in labels.items():
        if not _LABEL_KEY.fullmatch(key):
            raise ValueError(f"label {key!r}: keys are 1 to 64 letters, digits, '_' or '-'")
        if not isinstance(value, str) or len(value) > MAX_LABEL_VALUE:
            raise ValueError(f"label {key!r}: values are strings of at most {MAX_LABEL_VALUE} characters")
        if "\x00" in value:
            raise ValueError(f"label {key!r}: a value cannot hold NUL")
    return labels


class Routing:
    """Which endpoints one event reaches: their types, then their filters. The document a
    filter reads is made once per event, and only if some endpoint has a filter."""

    def __init__(self, event_type: str, tenant: str | None, labels: dict[str, str] | None,
                 payload: bytes, content_type: str) -> None:  # fmt: skip
        self._type = event_type
        self._tenant = tenant
        self._labels = labels
        self._payload = payload
        self._content_type = content_type
        self._document: dict[str, object] | None = None

    def takes(self, patterns: tuple[str, ...] | None, filter_source: str | None) -> bool:
        """Whether an endpoint subscribed to ``patterns`` with this stored filter takes it."""
        if not matches(patterns, self._type):
            return False
        if filter_source is None:
            return True
        if self._document is None:
            self._document = filter_document(
                self._type, self._tenant, self._labels, self._payload, self._content_type
            )
        return stored_filter(filter_source).matches(self._document)


def envelope(event_type: str, timestamp: str, payload: bytes, content_type: str) -> bytes:
    """The Standard Webhooks envelope ``{"type", "timestamp", "data"}`` around the payload's
    bytes as published (never re-serialised); a payload that is not JSON goes as
    ``data_base64``."""
    head = b'{"type":' + to_json(event_type).encode() + b',"timestamp":' + to_json(timestamp).encode()
    if content_type == JSON_PAYLOAD:
        return head + b',"data":' + payload + b"}"
    return head + b',"data_base64":' + to_json(base64.b64encode(payload).decode()).encode() + b"}"


def envelope_time(value: datetime) -> str:
    """The envelope's timestamp: RFC 3339 in UTC with microseconds (the SQL publish_event
    writes the same)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def delivery_headers(endpoint_headers: dict[str, str], content_type: str) -> dict[str, str]:
    """What an event's delivery carries: the endpoint's headers, and the payload's
    content-type unless they name one."""
    headers = dict(endpoint_headers)
    if not any(name.lower() == "content-type" for name in headers):
        headers["content-type"] = content_type
    return headers


def origin_of(url: str) -> str:
    """The destination origin a plain task's breaker counts for: scheme://host:port."""
    # Every enqueue asks, and a queue's tasks go to a few origins: a plain URL's is
    # remembered by its scheme and authority (the path would make every URL new).
    authority = plain_origin(url)
    return _origin_of_any(url) if authority is None else _origin_of_authority(authority)


@functools.lru_cache(maxsize=1024)
def _origin_of_authority(authority: str) -> str:
    return _origin_of_any(authority + "/")


def _origin_of_any(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 address, bracketed as in a URL
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}"


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """What a client sets on an endpoint. ``delivery`` is its queue's config (its
    ``paused`` is ignored here: ``enabled`` says that)."""

    url: str
    description: str | None = None
    event_types: tuple[str, ...] | None = None
    tenant: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delivery: QueueConfig = field(default_factory=QueueConfig)
    payload_format: PayloadFormat = "raw"
    filter: EventFilter | None = None


@dataclass(frozen=True, slots=True)
class Health:
    state: HealthState
    consecutive_failures: int = 0
    failing_since: datetime | None = None
    last_success_at: datetime | None = None
    disabled_reason: str | None = None
    probe_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    id: str
    spec: EndpointSpec
    enabled: bool
    health: Health
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class NewEvent:
    id: str
    type: str
    payload: bytes
    content_type: str  # application/json for a JSON payload
    tenant: str | None = None
    key: str | None = None
    idempotency_key: str | None = None
    run_at: datetime | None = None  # None: due now
    callback_url: str | None = None  # given to each of its deliveries
    failure_callback_url: str | None = None
    traceparent: str | None = None  # W3C trace context, given to each of its deliveries
    tracestate: str | None = None
    labels: dict[str, str] | None = None

    def routing(self) -> Routing:
        return Routing(self.type, self.tenant, self.labels, self.payload, self.content_type)


@dataclass(frozen=True, slots=True)
class Delivery:
    endpoint_id: str
    task_id: str
    status: TaskStatus
    attempts: int


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    type: str
    tenant: str | None
    key: str | None
    idempotency_key: str | None
    payload: bytes
    content_type: str
    run_at: datetime
    created_at: datetime
    deliveries: list[Delivery]
    callback_url: str | None = None
    failure_callback_url: str | None = None
    labels: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Published:
    event: Event
    created: bool  # False: an earlier event had the same idempotency key


def health_state(enabled: bool, breaker_open: bool, consecutive_failures: int) -> HealthState:
    if not enabled:
        return "disabled"
    if breaker_open:
        return "open"
    return "failing" if consecutive_failures > 0 else "healthy"
