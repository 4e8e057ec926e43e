"""Rows of the event catalogue as domain objects, for both backends."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from workly.event_types import EventType, EventTypeSpec
from workly.storage.rows import Decoders, Row


def _json(value: str) -> Any:
    """A JSON column's text (both dialects read it as text), decoded with json: integers
    beyond 64 bits stay exact (orjson would make them floats), as the client gave them."""
    return json.loads(value)


def event_type_spec_from_row(row: Row) -> EventTypeSpec:
    return EventTypeSpec(
        description=row["description"],
        schema=None if row["schema"] is None else _json(row["schema"]),
        examples=tuple(_json(row["examples"])),
        deprecated=bool(row["deprecated"]),
    )


def event_type_from_row(row: Row, dec: Decoders) -> EventType:
    return EventType(
        type=row["type"],
        spec=event_type_spec_from_row(row),
        version=row["version"],
        created_at=dec.time(row["created_at"]),
        updated_at=dec.time(row["updated_at"]),
    )


def event_type_params(
    event_type: str, spec: EventTypeSpec, now: Any, time: Callable[[Any], Any], encode: Callable[[Any], Any]
) -> dict[str, Any]:
    """put_event_type's and update_event_type's parameters; JSON as the dialect takes it
    (``encode``: PostgreSQL's codec takes the value itself, SQLite text)."""
    return {
        "type": event_type,
        "description": spec.description,
        "schema": None if spec.schema is None else encode(spec.schema),
        "examples": encode(list(spec.examples)),
        "deprecated": spec.deprecated,
        "now": time(now),
    }
