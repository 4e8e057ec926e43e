"""The SQLite database file (Database): migrations, reachability; the rest is PostgreSQL's."""

from __future__ import annotations

from collections.abc import Callable

from workly.storage.contract.notifier import SqlEnqueued
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.queries import sqlite_queries
from workly.storage.sqlite.statements import Connections, fetchall, migrate, schema_version


@raises_workly_errors(interpret_sqlite_error)
class SqliteDatabase:
    def __init__(self, db: Connections) -> None:
        self._writer = db.writer
        self._reader = db.reader
        self._acknowledged = db.acknowledged

    async def migrate(self) -> list[int]:
        return await self._writer.transaction(self._acknowledged, migrate)

    async def schema_version(self) -> int:
        return await self._writer.transaction(self._acknowledged, schema_version)

    async def ping(self) -> None:
        await self._reader.run(fetchall, sqlite_queries().ping)

    async def check_install_location(self) -> None:
        """A SQLite file is the install: there is nowhere else to look."""

    async def database_now(self) -> None:
        return None  # a file of this host: its clock is this host's

    async def needs_vacuum(self) -> bool:
        return False  # rows are updated in place: no dead versions pile up

    async def set_sql_limits(self, max_body_bytes: int) -> None:
        """SQLite has no SQL functions to tell."""


@raises_workly_errors(interpret_sqlite_error)
class SqliteNotifier:
    """One process: the enqueuer already woke the only dispatcher, and nobody else announces."""

    async def announce_work(self) -> None:
        """Nobody else to tell."""

    async def listen_for_work(
        self,
        on_work: Callable[[], None],
        sql_poll_interval: float | None = None,
        on_sql_enqueued: SqlEnqueued | None = None,
    ) -> None:
        """Nobody else announces work."""
