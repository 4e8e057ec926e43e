"""Request bodies of API v1. Unknown fields are rejected (``extra="forbid"``)."""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

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

from workly.api.body import encode_body
from workly.dispatch.http_client import CONNECTION_HEADERS, request_target
from workly.errors import ConfigError
from workly.signing import decode_secret

MAX_URL_LENGTH = 4096
RUN_AT_MIN = datetime(1970, 1, 1, tzinfo=UTC)
RUN_AT_MAX = datetime(3000, 1, 1, tzinfo=UTC)
MAX_BATCH = 1000
MAX_HEADERS = 64
# fullmatch, never match with ^…$: "$" also matches before a final newline ("a\n").
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Control characters other than tab cannot travel in a header value (CR and LF would
# even split the request, NEL splits lines for some readers); Workly sends header values
# as latin-1, as HTTP/1.1 does.
_FORBIDDEN_VALUE_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # C0, DEL, C1 (NEL splits lines too)
_SIGNATURE_HEADERS = frozenset({"webhook-id", "webhook-timestamp", "webhook-signature"})
MAX_HEADER_VALUE = 8 * 1024
MAX_HEADERS_TOTAL = 32 * 1024

# Keys are printable text: no control characters (PostgreSQL text cannot even hold NUL).
ShortText = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]


_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


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
    _encoded: tuple[dict[str, str], bytes] | None = PrivateAttr(default=None)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"not a valid URL: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise ValueError("the URL scheme must be http or https")
        if not parts.hostname:
            raise ValueError("the URL must name a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("the URL must not carry credentials (user:password@); use a header")
        if port == 0:
            raise ValueError("the URL port must be 1-65535")
        if any(ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
            raise ValueError("the URL must not contain whitespace or control characters")
        try:
            target = request_target(value)  # the deliverer's own reading of it
        except ValueError as exc:
            raise ValueError(f"not a valid URL: {exc}") from None
        if not target.raw_host:
            raise ValueError("the URL must name a host")
        return value

    @field_validator("headers")
    @classmethod
    def _valid_headers(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_HEADERS:
            raise ValueError(f"at most {MAX_HEADERS} headers")
        lowered: set[str] = set()
        for name, header_value in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"invalid header name {name!r}")
            if _FORBIDDEN_VALUE_CHARS.search(header_value):
                raise ValueError(f"header {name!r} contains a control character (CR, LF, NUL, …)")
            if header_value != header_value.strip(" \t"):
                # HTTP drops it on the way (RFC 9110 §5.5): the receiver would see another value.
                raise ValueError(f"header {name!r} begins or ends with whitespace")
            if not header_value.isascii() and not _is_latin1(header_value):
                raise ValueError(f"header {name!r} has characters HTTP headers cannot carry (not latin-1)")
            if name.lower() in _SIGNATURE_HEADERS:
                raise ValueError(f"header {name!r} is set by Workly on every delivery (Standard Webhooks)")
            if name.lower() in CONNECTION_HEADERS:
                raise ValueError(
                    f"header {name!r} belongs to the connection; Workly sets what it needs itself"
                )
            if len(header_value) > MAX_HEADER_VALUE:
                raise ValueError(f"header {name!r} is longer than {MAX_HEADER_VALUE} characters")
            if name.lower() in lowered:
                raise ValueError(f"header {name!r} is given twice")
            lowered.add(name.lower())
        if sum(len(name) + len(v) for name, v in value.items()) > MAX_HEADERS_TOTAL:
            raise ValueError(f"the headers together are longer than {MAX_HEADERS_TOTAL} characters")
        return value

    @field_validator("body_base64")
    @classmethod
    def _valid_base64(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                base64.b64decode(value, validate=True)
            except binascii.Error:
                raise ValueError("body_base64 is not valid base64") from None
        return value

    @field_validator("run_at")
    @classmethod
    def _aware_and_in_range(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("run_at needs a UTC offset (RFC 3339), e.g. 2030-01-01T00:00:00Z")
        try:
            in_utc = value.astimezone(UTC)
        except OverflowError:
            in_utc = None
        if in_utc is None or not RUN_AT_MIN <= in_utc < RUN_AT_MAX:
            raise ValueError("run_at must fall in the years 1970 to 2999 (UTC)")
        return in_utc

    @model_validator(mode="after")
    def _exclusive_and_encoded(self) -> TaskIn:
        if "body" in self.model_fields_set and self.body_base64 is not None:
            raise ValueError("give either body or body_base64, not both")
        if self.delay is not None and self.run_at is not None:
            raise ValueError("give either delay or run_at, not both")
        # Encoded once, here: a body that cannot be encoded is a 422, not a 500 later.
        self._encoded = encode_body(self.headers, self.body, self.body_base64)
        return self

    @property
    def encoded(self) -> tuple[dict[str, str], bytes]:
        """The headers and body bytes to store and send."""
        assert self._encoded is not None
        return self._encoded


def check_secrets(value: str) -> str:
    """Space-separated whsec_ secrets, each decodable; the message never repeats them."""
    secrets = value.split()
    if not secrets:
        raise ValueError("give at least one whsec_ secret, or null for none")
    for index, secret in enumerate(secrets):
        try:
            decode_secret(secret)
        except ConfigError:
            raise ValueError(f"secret {index + 1} is not a valid whsec_<base64> secret") from None
    return " ".join(secrets)


SigningSecrets = Annotated[str, Field(max_length=4096), AfterValidator(check_secrets)]


class TaskBatchIn(_Strict):
    tasks: list[TaskIn] = Field(min_length=1, max_length=MAX_BATCH)


class QueueConfigIn(_Strict):
    """A queue's full config (PUT): fields left out take their defaults."""

    max_concurrency: int = Field(default=3, ge=1, le=10_000)
    rate_limit: float | None = Field(default=None, gt=0, le=1_000_000, description="dispatches per second")
    max_attempts: int = Field(default=10, ge=1, le=1000)
    min_backoff: float = Field(default=1.0, ge=0, le=86_400)
    max_backoff: float = Field(default=3600.0, ge=0, le=30 * 86_400)
    timeout: float = Field(default=30.0, gt=0, le=3600)
    ordering: Literal["none", "key"] = "none"
    paused: bool = False
    signing_secret: SigningSecrets | None = Field(
        default=None,
        description="whsec_ secrets (space separated, the first current) that sign this queue's "
        "deliveries instead of WORKLY_SIGNING_SECRET; write-only",
    )


class QueuePatchIn(_Strict):
    """Some config fields (PATCH): only the fields given change."""

    max_concurrency: int | None = Field(default=None, ge=1, le=10_000)
    rate_limit: float | None = Field(default=None, gt=0, le=1_000_000)
    max_attempts: int | None = Field(default=None, ge=1, le=1000)
    min_backoff: float | None = Field(default=None, ge=0, le=86_400)
    max_backoff: float | None = Field(default=None, ge=0, le=30 * 86_400)
    timeout: float | None = Field(default=None, gt=0, le=3600)
    ordering: Literal["none", "key"] | None = None
    paused: bool | None = None
    signing_secret: SigningSecrets | None = Field(default=None, description="null removes it")

    @model_validator(mode="after")
    def _no_null_except_rate_limit(self) -> QueuePatchIn:
        for name in self.model_fields_set - {"rate_limit", "signing_secret"}:
            if getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        return self

    def changes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.model_fields_set}


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
