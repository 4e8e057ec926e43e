"""The event catalogue's use cases (docs/webhooks.md): declaring event types, and what a
publish and a subscription must respect of them.

Every publish asks for its type's entry: it is remembered for ``CACHE_SECONDS``, so a type
changed in another process takes effect here within that time (in this process at once),
at the cost of one read per type and period. A schema is compiled once per process and
version (a type deleted and declared again is told apart by when it was created).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from workly.clock import Clock
from workly.errors import EventTypeNotFound, InvalidEventType, InvalidPayload
from workly.event_types import (
    MAX_ERRORS,
    EventType,
    EventTypesMode,
    EventTypeSpec,
    InvalidSchema,
    Validator,
    check_spec,
    compile_schema,
)
from workly.short_cache import ShortCache
from workly.storage.contract import CatalogueStore
from workly.webhooks import JSON_PAYLOAD, NewEvent, is_workly_event, matches

log = logging.getLogger("workly.catalogue")
CACHE_SECONDS = 0.5
MAX_VALIDATORS = 1024


class CatalogueUseCases:
    def __init__(self, store: CatalogueStore, clock: Clock, mode: EventTypesMode = "open") -> None:
        self._store = store
        self._clock = clock
        self.mode: EventTypesMode = mode
        self._entries: ShortCache[str, EventType | None] = ShortCache(clock, CACHE_SECONDS)
        self._validators: OrderedDict[tuple[str, int, datetime], Validator] = OrderedDict()
        # Raised by every change this process makes: a read that began before one is not
        # remembered (it may hold what the change replaced).
        self._generation = 0

    async def announce_mode(self) -> None:
        """Record WORKLY_EVENT_TYPES where the SQL publish_event reads it. Every process must
        agree: one that changes what another recorded says so."""
        before = await self._store.put_setting("event_types", self.mode)
        if before is not None and before != self.mode:
            log.warning(
                "WORKLY_EVENT_TYPES=%s here, but the database held %s (set by another process, or this "
                "one before a restart): SQL's publish_event now follows %s; give every process the "
                "same value", self.mode, before, self.mode,
            )  # fmt: skip

    # --- the catalogue -----------------------------------------------------------------
    async def put_event_type(self, event_type: str, spec: EventTypeSpec) -> tuple[EventType, bool]:
        _check(spec)
        stored, created = await self._store.put_event_type(event_type, spec, self._clock.now())
        self._changed(event_type)
        return stored, created

    async def update_event_type(self, event_type: str, changes: Mapping[str, Any]) -> EventType:
        # Checked before the write's transaction (a schema's examples may take a while to
        # check: nothing waits on the row meanwhile), and again inside it only if the type
        # changed in between.
        checked = replace((await self.get_event_type(event_type)).spec, **changes)
        _check(checked)

        def change(current: EventTypeSpec) -> EventTypeSpec:
            changed = replace(current, **changes)
            if changed != checked:
                _check(changed)
            return changed

        stored = await self._store.update_event_type(event_type, change, self._clock.now())
        self._changed(event_type)
        return stored

    async def get_event_type(self, event_type: str) -> EventType:
        found = await self._store.get_event_type(event_type)
        if found is None:
            raise EventTypeNotFound(event_type)
        return found

    async def list_event_types(
        self, include_deprecated: bool, limit: int, before_seq: int | None
    ) -> tuple[list[EventType], int | None]:
        return await self._store.list_event_types(include_deprecated, limit, before_seq)

    async def delete_event_type(self, event_type: str) -> None:
        await self._store.delete_event_type(event_type)
        self._changed(event_type)

    # --- what publishing and subscribing must respect -----------------------------------
    async def check_event(self, event: NewEvent) -> None:
        """Refuse an event strict mode does not know (InvalidEventType) or whose payload its
        type's schema rejects (InvalidPayload, with JSON Pointers). Workly's own events are
        not the catalogue's."""
        if is_workly_event(event.type):
            return
        entry = await self._entry(event.type)
        if entry is None:
            if self.mode == "strict":
                raise InvalidEventType(
                    f"event type {event.type!r} is not in the catalogue, and WORKLY_EVENT_TYPES=strict "
                    f"publishes only catalogue types: declare it with PUT /v1/event-types/{event.type} "
                    f"(workly event-type put {event.type})",
                    [("/type", "not in the catalogue")],
                )
            return
        if entry.spec.schema is None:
            return
        if event.content_type != JSON_PAYLOAD:
            raise InvalidPayload(
                event.type, [("", "the payload is not JSON (payload_base64), and its type has a schema")]
            )
        # json, not orjson: integers beyond 64 bits stay exact (a schema's const or bounds may be one).
        payload = json.loads(event.payload)
        errors = self.validator(entry).errors(payload, len(event.payload))
        if errors:
            shown = [(error.path, error.message) for error in errors[:MAX_ERRORS]]
            raise InvalidPayload(event.type, shown, more=len(errors) > MAX_ERRORS)

    async def check_subscription(self, patterns: Iterable[str] | None) -> None:
        """In strict mode, each pattern an endpoint subscribes to must match a catalogue type."""
        if self.mode != "strict" or patterns is None:
            return
        known = await self._store.catalogue_types()
        for index, pattern in enumerate(patterns):
            if not is_workly_event(pattern.removesuffix("*")) and not any(
                matches((pattern,), known_type) for known_type in known
            ):
                raise InvalidEventType(
                    f"event type pattern {pattern!r} matches no type of the catalogue, and "
                    "WORKLY_EVENT_TYPES=strict subscribes only to catalogue types: declare one with "
                    "PUT /v1/event-types/<type> (workly event-type put <type>)",
                    [(f"/event_types/{index}", "matches no catalogue type")],
                )

    async def first_example(self, event_type: str) -> Any | None:
        """The type's first example (None when it has none); EventTypeNotFound."""
        found = await self.get_event_type(event_type)
        return found.spec.examples[0] if found.spec.examples else None

    def validator(self, entry: EventType) -> Validator:
        """The type's compiled schema, compiled once per process and version (a type deleted
        and declared again is told apart by its creation time)."""
        key = (entry.type, entry.version, entry.created_at)
        validator = self._validators.get(key)
        if validator is None:
            assert entry.spec.schema is not None
            validator = compile_schema(entry.spec.schema)
            self._validators[key] = validator
            if len(self._validators) > MAX_VALIDATORS:
                self._validators.popitem(last=False)
        else:
            self._validators.move_to_end(key)
        return validator

    async def _entry(self, event_type: str) -> EventType | None:
        remembered = self._entries.get(event_type)
        if remembered is not None:
            return remembered.value
        generation = self._generation
        found = await self._store.get_event_type(event_type)
        if generation == self._generation:
            self._entries.put(event_type, found)
        return found

    def _changed(self, event_type: str) -> None:
        self._generation += 1
        self._entries.drop(event_type)


def _check(spec: EventTypeSpec) -> None:
    try:
        check_spec(spec)
    except InvalidSchema as exc:
        raise InvalidEventType(str(exc), [(error.path, error.message) for error in exc.errors]) from None
