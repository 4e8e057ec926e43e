"""The event catalogue's domain (docs/webhooks.md): event types, their JSON Schemas, and what
checking a payload against one answers.

Schemas are JSON Schema 2020-12, validated by jsonschema-rs (tools/bench/schema_validators.py
measured it ~150 times faster than python-jsonschema on an invoice-sized payload): formats are
asserted (``"format": "email"`` rejects what is no address), remote ``$ref``s are refused
(``offline``: a schema never makes Workly fetch a URL), and ``pattern`` uses a regex engine
without backtracking (linear time: no schema can make a publish spin).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import jsonschema_rs

EventTypesMode = Literal["open", "strict"]
EVENT_TYPES_MODES: tuple[EventTypesMode, ...] = ("open", "strict")
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
MAX_EXAMPLES = 10
MAX_ERRORS = 20  # validation errors answered; the rest are counted in the detail


@dataclass(frozen=True, slots=True)
class EventTypeSpec:
    """What a client declares about an event type."""

    description: str | None = None
    schema: dict[str, Any] | bool | None = None
    examples: tuple[Any, ...] = ()
    deprecated: bool = False


@dataclass(frozen=True, slots=True)
class EventType:
    type: str
    spec: EventTypeSpec
    version: int  # rises with every change: a compiled validator of another version is stale
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class PayloadError:
    path: str  # a JSON Pointer into the payload ("" is the payload itself)
    message: str


@dataclass(frozen=True, slots=True)
class Validator:
    """A compiled schema: checks payloads (Python values, as JSON parses them)."""

    compiled: Any = field(repr=False)

    def errors(self, payload: Any) -> list[PayloadError]:
        if self.compiled.is_valid(payload):  # the common case makes no error objects
            return []
        return [
            PayloadError(json_pointer(error.instance_path), error.message)
            for error in self.compiled.iter_errors(payload)
        ]


class InvalidSchema(ValueError):
    """A schema that is no JSON Schema 2020-12 Workly can use, or an example it rejects."""

    def __init__(self, message: str, errors: Sequence[PayloadError] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)


def json_pointer(path: Sequence[str | int]) -> str:
    """RFC 6901: ``["lines", 0, "a/b"]`` → ``/lines/0/a~1b``."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def compile_schema(schema: dict[str, Any] | bool) -> Validator:
    """A validator of ``schema``; InvalidSchema when it is not a usable 2020-12 schema."""
    if isinstance(schema, dict) and schema.get("$schema", DRAFT_2020_12) != DRAFT_2020_12:
        raise InvalidSchema(f"$schema must be {DRAFT_2020_12} (or left out): Workly validates 2020-12")
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        where = PayloadError(json_pointer(exc.instance_path), exc.message)
        raise InvalidSchema(f"schema is not valid JSON Schema 2020-12: {exc.message}", [where]) from None
    try:
        compiled = jsonschema_rs.Draft202012Validator(
            schema,
            validate_formats=True,
            offline=True,
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        raise InvalidSchema(f"schema cannot be used: {_first_line(exc)}") from None
    return Validator(compiled)


def check_spec(spec: EventTypeSpec) -> Validator | None:
    """The spec's validator (None without a schema); InvalidSchema when the schema is bad or
    an example fails it, its errors' paths pointing into the spec as given (/schema/…,
    /examples/0/…)."""
    if len(spec.examples) > MAX_EXAMPLES:
        raise InvalidSchema(f"at most {MAX_EXAMPLES} examples")
    if spec.schema is None:
        return None
    try:
        validator = compile_schema(spec.schema)
    except InvalidSchema as exc:  # its errors point into the request: under /schema
        raise InvalidSchema(
            str(exc), [PayloadError("/schema" + e.path, e.message) for e in exc.errors]
        ) from None
    failures = []
    for index, example in enumerate(spec.examples):
        for error in validator.errors(example):
            failures.append(PayloadError(f"/examples/{index}{error.path}", error.message))
    if failures:
        raise InvalidSchema("an example does not match the schema", failures[:MAX_ERRORS])
    return validator


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
