"""The event catalogue's domain (docs/webhooks.md): event types, their JSON Schemas, and what
checking a payload against one answers.

Schemas are JSON Schema 2020-12, validated by jsonschema-rs (tools/bench/schema_validators.py
measured it ~150 times faster than python-jsonschema on an invoice-sized payload): formats are
asserted (``"format": "email"`` rejects what is no address), remote ``$ref``s are refused
(``offline``: a schema never makes Workly fetch a URL), and ``pattern`` uses a regex engine
without backtracking (linear time: no schema can make a publish spin).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import jsonschema_rs

EventTypesMode = Literal["open", "strict"]
EVENT_TYPES_MODES: tuple[EventTypesMode, ...] = ("open", "strict")
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
MAX_EXAMPLES = 10
MAX_ERRORS = 20  # validation errors answered
MAX_MESSAGE = 300  # characters of one error's message (it may quote the whole failing value)
# A payload larger than this is answered with its first error only: the validator builds every
# error before it hands out one, and a large payload may hold thousands.
ALL_ERRORS_UP_TO = 16 * 1024
# Subschemas a schema may expand to with its references followed (each once per path): what
# one validation may visit at most per value. A chain of allOf's doubling through $refs
# would otherwise make every publish, and every example check, take minutes.
MAX_EXPANDED = 10_000


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

    def errors(self, payload: Any, size: int = 0) -> list[PayloadError]:
        """What is wrong with ``payload`` (``size``: its bytes), at most MAX_ERRORS + 1
        entries (one more says there were more)."""
        if self.compiled.is_valid(payload):  # the common case makes no error objects
            return []
        if size > ALL_ERRORS_UP_TO:
            try:
                self.compiled.validate(payload)
            except jsonschema_rs.ValidationError as first:
                return [_error(first)]
        found = itertools.islice(self.compiled.iter_errors(payload), MAX_ERRORS + 1)
        return [_error(error) for error in found]


def _error(error: Any) -> PayloadError:
    message = str(error.message)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    return PayloadError(json_pointer(error.instance_path), message)


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
        where = _error(exc)
        raise InvalidSchema(f"schema is not valid JSON Schema 2020-12: {where.message}", [where]) from None
    if _expanded(schema, schema, (), [0]) > MAX_EXPANDED:
        raise InvalidSchema(
            f"schema is too complex: with its references followed it expands to more than "
            f"{MAX_EXPANDED:,} subschemas (a chain of allOf/anyOf through $ref doubles at each step)",
            [PayloadError("", "too complex")],
        )
    try:
        compiled = jsonschema_rs.Draft202012Validator(
            schema,
            validate_formats=True,
            ignore_unknown_formats=False,  # a misspelt format would silently check nothing
            offline=True,
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        reason = _first_line(exc)
        if 'is not a "regex"' in reason:
            reason += " (patterns run in linear time: no look-around, no back-references)"
        elif reason.startswith("Unknown format"):
            reason = reason.split(". Adjust", 1)[0] + (
                " (known: date-time, date, time, duration, email, hostname, ipv4, ipv6, uri, uuid, regex, …)"
            )
        raise InvalidSchema(f"schema cannot be used: {reason}", [PayloadError("", reason)]) from None
    return Validator(compiled)


def _expanded(node: Any, root: Any, following: tuple[str, ...], count: list[int]) -> int:
    """How many subschemas validating one value may visit, references followed (a reference
    already being followed on this path is counted once: recursion walks the instance, not
    the schema); stops counting past MAX_EXPANDED."""
    if count[0] > MAX_EXPANDED:
        return count[0]
    if isinstance(node, list):
        for item in node:
            _expanded(item, root, following, count)
        return count[0]
    if not isinstance(node, dict):
        return count[0]
    count[0] += 1
    for key, value in node.items():
        if key in ("$ref", "$dynamicRef") and isinstance(value, str) and value.startswith("#"):
            if value not in following:
                _expanded(_resolve(root, value), root, (*following, value), count)
        elif key not in ("const", "enum", "examples", "default"):
            _expanded(value, root, following, count)
    return count[0]


def _resolve(root: Any, reference: str) -> Any:
    """A local reference's target (``#/$defs/a``), or None (an anchor or a missing one: the
    compiler has its own say on those)."""
    target = root
    for part in reference[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


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
