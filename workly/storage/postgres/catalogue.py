"""PostgreSQL's event catalogue and shared settings (CatalogueStore); the queries are in
sql/catalogue.sql."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from workly.errors import EventTypeNotFound
from workly.event_types import EventType, EventTypeSpec
from workly.storage import rows
from workly.storage.catalogue_rows import event_type_from_row, event_type_params, event_type_spec_from_row
from workly.storage.contract.catalogue import EventTypeChange
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import DECODERS, Connections, execute, fetch, fetchrow


def _same(value: Any) -> Any:
    return value


@raises_workly_errors(interpret_postgres_error)
class PostgresCatalogue:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q

    async def put_event_type(
        self, event_type: str, spec: EventTypeSpec, now: datetime
    ) -> tuple[EventType, bool]:
        row = await fetchrow(
            self._pool, self._q.put_event_type, **event_type_params(event_type, spec, now, _same, _same)
        )
        return event_type_from_row(row, DECODERS), bool(row["created"])

    async def update_event_type(self, event_type: str, change: EventTypeChange, now: datetime) -> EventType:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await fetchrow(conn, self._q.lock_event_type, type=event_type)
            if row is None:
                raise EventTypeNotFound(event_type)
            spec = change(event_type_spec_from_row(row))
            updated = await fetchrow(
                conn, self._q.update_event_type, **event_type_params(event_type, spec, now, _same, _same)
            )
            return event_type_from_row(updated, DECODERS)

    async def get_event_type(self, event_type: str) -> EventType | None:
        row = await fetchrow(self._pool, self._q.get_event_type, type=event_type)
        return None if row is None else event_type_from_row(row, DECODERS)

    async def list_event_types(
        self, include_deprecated: bool, limit: int, before_seq: int | None
    ) -> tuple[list[EventType], int | None]:
        found = await fetch(
            self._pool, self._q.list_event_types, include_deprecated=include_deprecated,
            **rows.page_params(limit, before_seq),
        )  # fmt: skip
        shown, next_seq = rows.page(found, limit)
        return [event_type_from_row(row, DECODERS) for row in shown], next_seq

    async def delete_event_type(self, event_type: str) -> None:
        if not await fetch(self._pool, self._q.delete_event_type, type=event_type):
            raise EventTypeNotFound(event_type)

    async def catalogue_types(self) -> list[str]:
        return [row["type"] for row in await fetch(self._pool, self._q.catalogue_types)]

    async def put_setting(self, name: str, value: str) -> str | None:
        async with self._pool.acquire() as conn, conn.transaction():
            before = await fetchrow(conn, self._q.get_setting, name=name)
            await execute(conn, self._q.put_setting, name=name, value=value)
        return None if before is None else str(before["value"])
