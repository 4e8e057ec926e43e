"""Request bodies of the webhook platform's routes (endpoints, events); unknown fields are
rejected, like every request body of API v1."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, JsonValue, PrivateAttr, field_validator, model_validator

from workly.api.schemas import (
    RUN_AT_MAX,
    RUN_AT_MIN,
    CallbackUrl,
    Deadline,
    Retention,
    ShortText,
    SigningSecrets,
    StopOn,
    _Strict,
    check_base64,
    check_run_at,
    policy_tuples,
)
from workly.body import compact_json
from workly.event_filter import EventFilter, compile_filter
from workly.ids import new_id
from workly.models import DEFAULT_STOP_ON, MIN_RATE_LIMIT, QueueConfig
from workly.request_rules import MAX_URL_LENGTH, check_headers, check_url
from workly.trace_context import TraceContext, stored
from workly.webhooks import (
    MAX_EVENT_TYPE,
    EndpointSpec,
    NewEvent,
    PayloadFormat,
    check_event_patterns,
    check_labels,
    check_published_type,
    check_subscription,
)

EventPatterns = Annotated[list[str], AfterValidator(check_event_patterns)]
# Free text for people: line breaks and tabs, but no other control character (PostgreSQL
# text cannot even hold NUL).
Description = Annotated[str, Field(max_length=1024, pattern=r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$")]
_FILTER_DOC = (
    "a content filter over {type, tenant, labels, payload}: {path: value or {$eq,$ne,$gt,$gte,$lt,$lte,"
    "$in,$nin,$exists}}, $and, $or, $not; null: every event its types match"
)
_FORMAT_DOC = "raw: the payload bytes; envelope: {type, timestamp, data}"


def _compiled(value: dict[str, JsonValue] | None) -> EventFilter | None:
    return None if value is None else compile_filter(value)


class EndpointIn(_Strict):
    """A new endpoint: fields left out take their defaults (a queue's, for delivery)."""

    url: str = Field(max_length=MAX_URL_LENGTH, description="http(s) URL events are delivered to")
    description: Description | None = None
    event_types: EventPatterns | None = Field(
        default=None, description="exact types (invoice.paid) or prefixes (invoice.*); null: every type"
    )
    tenant: ShortText | None = Field(default=None, description="receives only this tenant's events")
    headers: dict[str, str] = Field(default_factory=dict, description="added to every delivery")
    payload_format: PayloadFormat = Field(default="raw", description=_FORMAT_DOC)
    filter: dict[str, JsonValue] | None = Field(default=None, description=_FILTER_DOC)
    signing_secret: SigningSecrets | None = Field(
        default=None,
        description="whsec_ secrets (v1, HMAC) and whsk_ ed25519 keys (v1a), space separated, the first "
        "current; a whsec_ secret is generated when absent; write-only",
    )
    max_concurrency: int = Field(default=3, ge=1, le=10_000)
    rate_limit: float | None = Field(default=None, ge=MIN_RATE_LIMIT, le=1_000_000)
    max_attempts: int = Field(default=10, ge=1, le=1000)
    min_backoff: float = Field(default=1.0, ge=0, le=86_400)
    max_backoff: float = Field(default=3600.0, ge=0, le=30 * 86_400)
    timeout: float = Field(default=30.0, gt=0, le=3600)
    ordering: Literal["none", "key"] = "none"
    stop_on: StopOn = Field(default_factory=lambda: list(DEFAULT_STOP_ON))
    deadline: Deadline | None = None
    retention: Retention | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_url(value)

    @field_validator("headers")
    @classmethod
    def _valid_headers(cls, value: dict[str, str]) -> dict[str, str]:
        return check_headers(value)

    @model_validator(mode="after")
    def _workly_events_untenanted(self) -> EndpointIn:
        check_subscription(self.tenant, self.event_types)
        self._filter = _compiled(self.filter)  # a malformed filter is a 422 here
        return self

    _filter: EventFilter | None = PrivateAttr(default=None)

    def spec(self) -> EndpointSpec:
        return EndpointSpec(
            url=self.url,
            description=self.description,
            event_types=None if self.event_types is None else tuple(self.event_types),
            tenant=self.tenant,
            headers=self.headers,
            payload_format=self.payload_format,
            filter=self._filter,
            delivery=QueueConfig(
                max_concurrency=self.max_concurrency,
                rate_limit=self.rate_limit,
                max_attempts=self.max_attempts,
                min_backoff=self.min_backoff,
                max_backoff=self.max_backoff,
                timeout=self.timeout,
                ordering=self.ordering,
                signing_secret=self.signing_secret,
                stop_on=tuple(self.stop_on),
                deadline=self.deadline,
                retention=self.retention,
            ),
        )


_NULLABLE = frozenset(
    {
        "description",
        "event_types",
        "tenant",
        "rate_limit",
        "signing_secret",
        "deadline",
        "filter",
        "retention",
    }
)


class EndpointPatchIn(_Strict):
    """Some fields: only the fields given change. ``signing_secret: null`` makes a new one."""

    url: str | None = Field(default=None, max_length=MAX_URL_LENGTH)
    description: Description | None = None
    event_types: EventPatterns | None = None
    tenant: ShortText | None = None
    headers: dict[str, str] | None = None
    payload_format: PayloadFormat | None = Field(default=None, description=_FORMAT_DOC)
    filter: dict[str, JsonValue] | None = Field(default=None, description=_FILTER_DOC + " (null removes it)")
    signing_secret: SigningSecrets | None = None
    max_concurrency: int | None = Field(default=None, ge=1, le=10_000)
    rate_limit: float | None = Field(default=None, ge=MIN_RATE_LIMIT, le=1_000_000)
    max_attempts: int | None = Field(default=None, ge=1, le=1000)
    min_backoff: float | None = Field(default=None, ge=0, le=86_400)
    max_backoff: float | None = Field(default=None, ge=0, le=30 * 86_400)
    timeout: float | None = Field(default=None, gt=0, le=3600)
    ordering: Literal["none", "key"] | None = None
    stop_on: StopOn | None = None
    deadline: Deadline | None = None
    retention: Retention | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @field_validator("headers")
    @classmethod
    def _valid_headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else check_headers(value)

    @model_validator(mode="after")
    def _no_null_where_a_value_is_needed(self) -> EndpointPatchIn:
        for name in self.model_fields_set - _NULLABLE:
            if getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        self._filter = _compiled(self.filter)
        return self

    _filter: EventFilter | None = PrivateAttr(default=None)

    def changes(self) -> dict[str, Any]:
        found = policy_tuples({name: getattr(self, name) for name in self.model_fields_set})
        if found.get("event_types") is not None:
            found["event_types"] = tuple(found["event_types"])
        if "filter" in found:
            found["filter"] = self._filter
        return found


class RecoverIn(_Strict):
    since: datetime = Field(description="RFC 3339: tasks that failed at or after this time are re-enqueued")

    @field_validator("since")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("since needs a UTC offset (RFC 3339), e.g. 2030-01-01T00:00:00Z")
        # No task fails before 1970 or after 2999: a time beyond them means the same as
        # those bounds, which every database can hold (0001-01-01T00:00:00+01:00 is not even
        # a year in UTC).
        try:
            in_utc = value.astimezone(UTC)
        except OverflowError:
            return RUN_AT_MIN if value.year == 1 else RUN_AT_MAX
        return min(max(in_utc, RUN_AT_MIN), RUN_AT_MAX)


class ReplayIn(RecoverIn):
    since: datetime = Field(
        description="RFC 3339: events published at or after this time that the endpoint missed are delivered"
    )


class TestIn(_Strict):
    type: str | None = Field(
        default=None, max_length=MAX_EVENT_TYPE, description="a catalogue type: its first example is sent"
    )


class EventIn(_Strict):
    type: str = Field(max_length=MAX_EVENT_TYPE, description="such as invoice.paid")
    payload: JsonValue = Field(default=None, description="any JSON value, delivered as compact JSON")
    payload_base64: str | None = Field(default=None, description="raw payload bytes, base64")
    tenant: ShortText | None = None
    key: ShortText | None = Field(default=None, description="ordering key on each endpoint")
    idempotency_key: ShortText | None = None
    delay: float | None = Field(default=None, ge=0, le=366 * 86400, description="seconds from now")
    run_at: datetime | None = Field(default=None, description="RFC 3339 time with an offset")
    callback_url: CallbackUrl | None = Field(default=None, description="called after each delivery succeeded")
    failure_callback_url: CallbackUrl | None = Field(
        default=None, description="called after a delivery failed for good"
    )
    labels: dict[str, str] | None = Field(
        default=None, description="at most 10 string pairs, for endpoint filters (labels.<key>)"
    )
    _encoded: tuple[bytes, str] | None = PrivateAttr(default=None)

    @field_validator("labels")
    @classmethod
    def _valid_labels(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else check_labels(value)

    @field_validator("type")
    @classmethod
    def _valid_type(cls, value: str) -> str:
        return check_published_type(value)

    @field_validator("payload_base64")
    @classmethod
    def _valid_base64(cls, value: str | None) -> str | None:
        return check_base64(value, "payload_base64")

    @field_validator("run_at")
    @classmethod
    def _aware_and_in_range(cls, value: datetime | None) -> datetime | None:
        return check_run_at(value)

    @model_validator(mode="after")
    def _exclusive(self) -> EventIn:
        if "payload" in self.model_fields_set and self.payload_base64 is not None:
            raise ValueError("give either payload or payload_base64, not both")
        if "payload" not in self.model_fields_set and self.payload_base64 is None:
            raise ValueError("give payload (any JSON) or payload_base64")
        if self.delay is not None and self.run_at is not None:
            raise ValueError("give either delay or run_at, not both")
        # Encoded once, here: a payload that cannot be encoded is a 422, not a 500 later.
        self._encoded = _encode_payload(self.payload, self.payload_base64)
        return self

    def new_event(
        self, now: datetime, idempotency_header: str | None, trace: TraceContext | None = None
    ) -> NewEvent:
        assert self._encoded is not None
        traceparent, tracestate = stored(trace)
        payload, content_type = self._encoded
        run_at = self.run_at if self.delay is None else now + timedelta(seconds=self.delay)
        return NewEvent(
            id=new_id("evt"),
            type=self.type,
            payload=payload,
            content_type=content_type,
            tenant=self.tenant,
            key=self.key,
            idempotency_key=self.idempotency_key or idempotency_header,
            run_at=run_at,
            callback_url=self.callback_url,
            failure_callback_url=self.failure_callback_url,
            traceparent=traceparent,
            tracestate=tracestate,
            labels=self.labels or None,
        )


def _encode_payload(payload: JsonValue, payload_base64: str | None) -> tuple[bytes, str]:
    """The bytes delivered and their content type."""
    if payload_base64 is not None:
        return base64.b64decode(payload_base64), "application/octet-stream"
    try:
        encoded = compact_json(payload)
    except ValueError:
        # Python's JSON parser takes NaN and Infinity; JSON does not, so no receiver could.
        raise ValueError("payload must not contain NaN or Infinity (not JSON)") from None
    return encoded.encode(), "application/json"
