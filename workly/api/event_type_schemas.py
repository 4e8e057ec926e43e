"""Request bodies of the event catalogue's routes (docs/webhooks.md); unknown fields are
rejected, like every request body of API v1."""

from __future__ import annotations

from typing import Any

from pydantic import Field, JsonValue, field_validator, model_validator

from workly.api.schemas import _Strict
from workly.api.webhook_schemas import Description
from workly.event_types import MAX_EXAMPLES, EventTypeSpec

_SCHEMA_DOC = "a JSON Schema (2020-12) payloads of this type must match; null: any payload"


def _schema_shape(value: JsonValue) -> JsonValue:
    if value is not None and not isinstance(value, dict | bool):
        raise ValueError("schema must be a JSON Schema: an object, true, false, or null")
    return value


class EventTypeIn(_Strict):
    """An event type, created or replaced whole: fields left out take their defaults."""

    description: Description | None = None
    schema_: JsonValue = Field(default=None, alias="schema", description=_SCHEMA_DOC)
    examples: list[JsonValue] = Field(
        default_factory=list, max_length=MAX_EXAMPLES, description="payloads, each valid against the schema"
    )
    deprecated: bool = False

    @field_validator("schema_")
    @classmethod
    def _a_schema(cls, value: JsonValue) -> JsonValue:
        return _schema_shape(value)

    def spec(self) -> EventTypeSpec:
        return EventTypeSpec(
            description=self.description,
            schema=self.schema_,  # type: ignore[arg-type]  # checked by _shape
            examples=tuple(self.examples),
            deprecated=self.deprecated,
        )


class EventTypePatchIn(_Strict):
    """Some fields: only the fields given change."""

    description: Description | None = None
    schema_: JsonValue = Field(default=None, alias="schema", description=_SCHEMA_DOC)
    examples: list[JsonValue] | None = Field(default=None, max_length=MAX_EXAMPLES)
    deprecated: bool | None = None

    @field_validator("schema_")
    @classmethod
    def _a_schema(cls, value: JsonValue) -> JsonValue:
        return _schema_shape(value)

    @model_validator(mode="after")
    def _no_null_where_a_value_is_needed(self) -> EventTypePatchIn:
        for name in ("examples", "deprecated"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        return self

    def changes(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name in self.model_fields_set:
            value = getattr(self, name)
            if name == "schema_":
                found["schema"] = value
            elif name == "examples":
                found["examples"] = tuple(value)
            else:
                found[name] = value
        return found
