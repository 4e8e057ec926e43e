"""Request bodies of API v1. Unknown fields are rejected (``extra="forbid"``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    field_validator,
    model_validator,
)

from workly.body import encode_body
from workly.errors import ConfigError
from workly.ids import new_task_id
from workly.lifecycle import MAX_RETENTION
from workly.media import header_value, is_json_type
from workly.models import DEFAULT_STOP_ON, MIN_RATE_LIMIT, NewTask, check_stop_on
from workly.request_rules import MAX_URL_LENGTH, check_headers, check_url
from workly.signing import check_secret
from workly.trace_context import TraceContext, stored
from workly.webhooks import origin_of

RUN_AT_MIN = datetime(1970, 1, 1, tzinfo=UTC)
RUN_AT_MAX = datetime(3000, 1, 1, tzinfo=UTC)
MAX_BATCH = 1000

# Keys are printable text: no control characters (PostgreSQL text cannot even hold NUL).
ShortText = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]


_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_surrogates(value: Any) -> None:
    """JSON may spell lone UTF-16 surrogates (\\ud800) that no UTF-8 text can hold.

    Python's json module accepts them, and they would fail later (encoding the body,
    storing in PostgreSQL, rendering the response), so they are refused up front.
    """
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise ValueError(
                "text contains a lone UTF-16 surrogate (\\ud800-\\udfff), which is not valid Unicode"
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_surrogates(key)
            _reject_surrogates(item)
    elif isinstance(value, list):
        for item in value:
            _reject_surrogates(item)


MAX_DEADLINE = 366 * 86400  # seconds
StopOn = Annotated[
    list[str],
    AfterValidator(lambda value: list(check_stop_on(value))),
    Field(
        description='status codes ("404") and classes ("4xx") after which a task fails at once; '
        "408, 425 and 429 are retried whatever it says"
    ),
]
Deadline = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_DEADLINE,
        description="seconds after creation (or a redrive) after which no attempt starts",
    ),
]
Retention = Annotated[
    int,
    Field(
        strict=True,  # a true, "60" or 1e3 here is a mistake that would delete data within a minute
        ge=0,
        le=MAX_RETENTION,
        description="seconds its finished tasks are kept, whatever their outcome, instead of "
        "WORKLY_RETENTION and WORKLY_FAILED_RETENTION; 0: forever; null: those settings",
    ),
]
MinBackoff = Annotated[float, Field(ge=0, le=86_400)]
MaxBackoff = Annotated[float, Field(ge=0, le=30 * 86_400)]
CallbackUrl = Annotated[str, Field(max_length=MAX_URL_LENGTH), AfterValidator(check_url)]


def check_backoffs(min_backoff: float | None, max_backoff: float | None) -> None:
    if min_backoff is not None and max_backoff is not None and min_backoff > max_backoff:
        raise ValueError(f"min_backoff ({min_backoff:g}s) must not exceed max_backoff ({max_backoff:g}s)")


# Canonical base64 (RFC 4648): groups of four characters, the last padded with exactly the
# "=" it needs. Python's own strict mode took more or less than that from version to version.
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def check_base64(value: str | None, field: str) -> str | None:
    if value is not None and not _BASE64.fullmatch(value):
        raise ValueError(f"{field} is not valid base64")
    return value


def check_run_at(value: datetime | None, field: str = "run_at") -> datetime | None:
    """An RFC 3339 time with an offset, within the years 1970-2999, as UTC (as Workly keeps
    and shows every time); ``field`` names it in the message."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError(f"{field} needs a UTC offset (RFC 3339), e.g. 2030-01-01T00:00:00Z")
    try:
        in_utc = value.astimezone(UTC)
    except OverflowError:
        in_utc = None
    if in_utc is None or not RUN_AT_MIN <= in_utc < RUN_AT_MAX:
        raise ValueError(f"{field} must fall in the years 1970 to 2999 (UTC)")
    return in_utc


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        _reject_surrogates(data)
        return data


class TaskIn(_Strict):
    url: str = Field(max_length=MAX_URL_LENGTH, description="http(s) URL the request is delivered to")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, description="sent as given")
    body: JsonValue = Field(
        default=None,
        description="any JSON value, sent as compact JSON (a string with a non-JSON "
        "content-type header is sent as UTF-8 text)",
    )
    body_base64: str | None = Field(default=None, description="raw body bytes, base64")
    delay: float | None = Field(default=None, ge=0, le=366 * 86400, description="seconds from now")
    run_at: datetime | None = Field(default=None, description="RFC 3339 time with an offset")
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000, description="higher first")
    key: ShortText | None = Field(default=None, description="ordering key")
    tenant: ShortText | None = Field(default=None, description="fairness key")
    idempotency_key: ShortText | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=1000)
    timeout: float | None = Field(default=None, gt=0, le=3600, description="seconds per attempt")
    stop_on: StopOn | None = None
    deadline: Deadline | None = None
    min_backoff: MinBackoff | None = None
    max_backoff: MaxBackoff | None = None
    callback_url: CallbackUrl | None = Field(default=None, description="called once after it succeeded")
    failure_callback_url: CallbackUrl | None = Field(
        default=None, description="called once after it failed for good"
    )
    _encoded: tuple[dict[str, str], bytes] | None = PrivateAttr(default=None)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_url(value)

    @field_validator("headers")
    @classmethod
    def _valid_headers(cls, value: dict[str, str]) -> dict[str, str]:
        return check_headers(value)

    @field_validator("body_base64")
    @classmethod
    def _valid_base64(cls, value: str | None) -> str | None:
        return check_base64(value, "body_base64")

    @field_validator("run_at")
    @classmethod
    def _aware_and_in_range(cls, value: datetime | None) -> datetime | None:
        return check_run_at(value)

    @model_validator(mode="after")
    def _exclusive_and_encoded(self) -> TaskIn:
        if "body" in self.model_fields_set and self.body_base64 is not None:
            raise ValueError("give either body or body_base64, not both")
        if self.delay is not None and self.run_at is not None:
            raise ValueError("give either delay or run_at, not both")
        check_backoffs(self.min_backoff, self.max_backoff)
        # Encoded once, here: a body that cannot be encoded is a 422, not a 500 later.
        self._encoded = encode_body(self.headers, self.body, self.body_base64)
        return self

    @property
    def encoded(self) -> tuple[dict[str, str], bytes]:
        """The headers and body bytes to store and send."""
        # Read from pydantic's own store of private attributes: ``self._encoded`` goes
        # through BaseModel.__getattr__, 6 µs a read, a third of what building a task costs.
        private = self.__pydantic_private__
        encoded: tuple[dict[str, str], bytes] | None = None if private is None else private["_encoded"]
        assert encoded is not None
        return encoded

    def body_fields(self) -> tuple[JsonValue, None] | None:
        """The body as the stored task shows it (task_json.body_fields), known without
        parsing the stored bytes again: a JSON value other than text, stored as JSON (its
        compact encoding reads back as this very value). None: ask the stored bytes."""
        headers, _ = self.encoded
        if self.body_base64 is not None or self.body is None or isinstance(self.body, str):
            return None
        content_type = header_value(headers, "content-type")
        if content_type is None or not is_json_type(content_type):
            return None
        return self.body, None

    def new_task(
        self,
        queue: str,
        now: datetime,
        idempotency_header: str | None = None,
        trace: TraceContext | None = None,
    ) -> NewTask:
        """The task to store in ``queue``, with a new id; ``delay`` counts from ``now``;
        ``trace``: the request's trace context, carried to each attempt."""
        headers, body = self.encoded
        traceparent, tracestate = stored(trace)
        run_at = self.run_at if self.delay is None else now + timedelta(seconds=self.delay)
        return NewTask(
            id=new_task_id(),
            queue=queue,
            url=self.url,
            method=self.method,
            headers=headers,
            body=body,
            run_at=run_at,
            priority=self.priority,
            key=self.key,
            tenant=self.tenant,
            idempotency_key=self.idempotency_key or idempotency_header,
            max_attempts=self.max_attempts,
            timeout=self.timeout,
            breaker=origin_of(self.url),  # its destination origin's circuit breaker
            stop_on=None if self.stop_on is None else tuple(self.stop_on),
            deadline=self.deadline,
            min_backoff=self.min_backoff,
            max_backoff=self.max_backoff,
            callback_url=self.callback_url,
            failure_callback_url=self.failure_callback_url,
            traceparent=traceparent,
            tracestate=tracestate,
        )


def check_secrets(value: str) -> str:
    """Space-separated whsec_ secrets and whsk_ ed25519 keys, each usable; the message says
    why without repeating them."""
    secrets = value.split()
    if not secrets:
        raise ValueError("give at least one whsec_ secret or whsk_ key, or null for none")
    for index, secret in enumerate(secrets):
        try:
            check_secret(secret)
        except ConfigError as exc:
            raise ValueError(f"secret {index + 1}: {exc}") from None
    return " ".join(secrets)


SigningSecrets = Annotated[str, Field(max_length=4096), AfterValidator(check_secrets)]


class TaskBatchIn(_Strict):
    tasks: list[TaskIn] = Field(min_length=1, max_length=MAX_BATCH)


class QueueConfigIn(_Strict):
    """A queue's full config (PUT): fields left out take their defaults."""

    max_concurrency: int = Field(default=3, ge=1, le=10_000)
    rate_limit: float | None = Field(
        default=None, ge=MIN_RATE_LIMIT, le=1_000_000, description="dispatches per second"
    )
    max_attempts: int = Field(default=10, ge=1, le=1000)
    min_backoff: float = Field(default=1.0, ge=0, le=86_400)
    max_backoff: float = Field(default=3600.0, ge=0, le=30 * 86_400)
    timeout: float = Field(default=30.0, gt=0, le=3600)
    ordering: Literal["none", "key"] = "none"
    paused: bool = False
    signing_secret: SigningSecrets | None = Field(
        default=None,
        description="whsec_ secrets (v1, HMAC) and whsk_ ed25519 keys (v1a), space separated, the "
        "first current, that sign this queue's deliveries instead of WORKLY_SIGNING_SECRET; write-only "
        "(public_keys shows the whpk_ keys of its whsk_ ones)",
    )
    stop_on: StopOn = Field(default_factory=lambda: list(DEFAULT_STOP_ON))
    deadline: Deadline | None = None
    retention: Retention | None = None


class QueuePatchIn(_Strict):
    """Some config fields (PATCH): only the fields given change."""

    max_concurrency: int | None = Field(default=None, ge=1, le=10_000)
    rate_limit: float | None = Field(default=None, ge=MIN_RATE_LIMIT, le=1_000_000)
    max_attempts: int | None = Field(default=None, ge=1, le=1000)
    min_backoff: float | None = Field(default=None, ge=0, le=86_400)
    max_backoff: float | None = Field(default=None, ge=0, le=30 * 86_400)
    timeout: float | None = Field(default=None, gt=0, le=3600)
    ordering: Literal["none", "key"] | None = None
    paused: bool | None = None
    signing_secret: SigningSecrets | None = Field(default=None, description="null removes it")
    stop_on: StopOn | None = None
    deadline: Deadline | None = Field(default=None, description="null removes it")
    retention: Retention | None = None

    @model_validator(mode="after")
    def _no_null_except_rate_limit(self) -> QueuePatchIn:
        for name in self.model_fields_set - {"rate_limit", "signing_secret", "deadline", "retention"}:
            if getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        return self

    def changes(self) -> dict[str, Any]:
        return policy_tuples({name: getattr(self, name) for name in self.model_fields_set})


def policy_tuples(changes: dict[str, Any]) -> dict[str, Any]:
    """A stop_on list as the config keeps it (a tuple)."""
    if changes.get("stop_on") is not None:
        changes["stop_on"] = tuple(changes["stop_on"])
    return changes


def inline_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its ``$defs`` inlined, to embed in an OpenAPI operation."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(definitions[ref.removeprefix("#/$defs/")])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved
