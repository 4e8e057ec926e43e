"""SQLite's event catalogue and shared settings (CatalogueStore); the queries are in
sql/catalogue.sql. Each write runs in one BEGIN IMMEDIATE transaction."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from workly.errors import EventTypeNotFound
from workly.event_types import EventType, EventTypeSpec
from workly.json_text import to_json
from workly.storage import rows
from workly.storage.catalogue_rows import event_type_from_row, event_type_params, event_type_spec_from_row
from workly.storage.contract.catalogue import EventTypeChange
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import DECODERS, Connections, execute, fetchall, fetchone, to_us

Db = sqlite3.Connection
_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteCatalogue:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def put_event_type(
        self, event_type: str, spec: EventTypeSpec, now: datetime
    ) -> tuple[EventType, bool]:
        return await self._writer.transaction(self._acknowledged, _put, event_type, spec, now)

    async def update_event_type(self, event_type: str, change: EventTypeChange, now: datetime) -> EventType:
        return await self._writer.transaction(self._acknowledged, _update, event_type, change, now)

    async def get_event_type(self, event_type: str) -> EventType | None:
        row = await self._reader.run(fetchone, _q().get_event_type, {"type": event_type})
        return None if row is None else event_type_from_row(row, DECODERS)

    async def list_event_types(
        self, include_deprecated: bool, limit: int, before_seq: int | None
    ) -> tuple[list[EventType], int | None]:
        params = {**rows.page_params(limit, before_seq), "include_deprecated": include_deprecated}
        found = await self._reader.run(fetchall, _q().list_event_types, params)
        shown, next_seq = rows.page(found, limit)
        return [event_type_from_row(row, DECODERS) for row in shown], next_seq

    async def delete_event_type(self, event_type: str) -> None:
        await self._writer.transaction(self._acknowledged, _delete, event_type)

    async def catalogue_types(self) -> list[str]:
        return [row["type"] for row in await self._reader.run(fetchall, _q().catalogue_types, {})]

    async def put_setting(self, name: str, value: str) -> str | None:
        return await self._writer.transaction(self._acknowledged, _put_setting, name, value)


def _put(db: Db, event_type: str, spec: EventTypeSpec, now: datetime) -> tuple[EventType, bool]:
    row = fetchone(db, _q().put_event_type, event_type_params(event_type, spec, now, to_us, to_json))
    assert row is not None, "an upsert returns its row"
    return event_type_from_row(row, DECODERS), bool(row["created"])


def _update(db: Db, event_type: str, change: EventTypeChange, now: datetime) -> EventType:
    row = fetchone(db, _q().lock_event_type, {"type": event_type})
    if row is None:
        raise EventTypeNotFound(event_type)
    spec = change(event_type_spec_from_row(row))
    updated = fetchone(db, _q().update_event_type, event_type_params(event_type, spec, now, to_us, to_json))
    assert updated is not None, "locked above"
    return event_type_from_row(updated, DECODERS)


def _put_setting(db: Db, name: str, value: str) -> str | None:
    before = fetchone(db, _q().get_setting, {"name": name})
    execute(db, _q().put_setting, {"name": name, "value": value})
    return None if before is None else str(before["value"])


def _delete(db: Db, event_type: str) -> None:
    if not fetchall(db, _q().delete_event_type, {"type": event_type}):
        raise EventTypeNotFound(event_type)
