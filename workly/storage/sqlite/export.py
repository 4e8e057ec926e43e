"""SQLite's tenant export (ExportStore); the queries are in sql/lifecycle.sql."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from workly.json_text import to_json
from workly.lifecycle import ExportedTask
from workly.storage.export_rows import exported
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import Query, sqlite_queries
from workly.storage.sqlite.statements import DECODERS, Connections, fetchall

_q = sqlite_queries


@raises_workly_errors(interpret_sqlite_error)
class SqliteExport:
    def __init__(self, db: Connections) -> None:
        self._reader = db.reader

    async def tasks_of_events(
        self, event_ids: Sequence[str], after_seq: int, limit: int
    ) -> list[ExportedTask]:
        params = {"ids": to_json(list(event_ids)), "after_seq": after_seq, "limit": limit}
        return await self._reader.run(_page, _q().export_event_tasks, params)

    async def tenant_tasks(self, tenant: str, after_seq: int, limit: int) -> list[ExportedTask]:
        params = {"tenant": tenant, "after_seq": after_seq, "limit": limit}
        return await self._reader.run(_page, _q().export_tenant_tasks, params)

    async def test_deliveries(self, endpoint_id: str, after_seq: int, limit: int) -> list[ExportedTask]:
        params = {"queue": endpoint_id, "after_seq": after_seq, "limit": limit}
        return await self._reader.run(_page, _q().export_test_tasks, params)


def _page(db: sqlite3.Connection, query: Query, params: dict[str, Any]) -> list[ExportedTask]:
    """On the reader: the tasks and their attempts in one read transaction."""
    tasks = fetchall(db, query, params)
    seqs = to_json([row["seq"] for row in tasks])
    attempts = fetchall(db, _q().export_attempts, {"seqs": seqs}) if tasks else []
    return exported(tasks, attempts, DECODERS)
