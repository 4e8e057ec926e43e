"""The SQLite backend: WAL, one writer connection (BEGIN IMMEDIATE), one reader connection,
shared by one object per storage role.

Single process only. Each connection lives on its own thread (thread.py) and every
operation is one function run there: a write is one BEGIN IMMEDIATE … COMMIT, so the
single writer is never interleaved and costs one hand-off per transaction.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from workly.database_url import sqlite_path
from workly.errors import ConfigError
from workly.storage.interpret import interpret_sqlite_error, raises_workly_errors
from workly.storage.sqlite.access import SqliteAudit, SqliteKeys, SqliteSessions, SqliteTenants
from workly.storage.sqlite.catalogue import SqliteCatalogue
from workly.storage.sqlite.database import SqliteDatabase, SqliteNotifier
from workly.storage.sqlite.dispatch import SqliteDispatch
from workly.storage.sqlite.export import SqliteExport
from workly.storage.sqlite.history import SqliteHistory
from workly.storage.sqlite.operations import SqliteCallbacks, SqliteOperations
from workly.storage.sqlite.queues import SqliteQueues
from workly.storage.sqlite.retention import SqliteRetention
from workly.storage.sqlite.schedules import SqliteSchedules
from workly.storage.sqlite.statements import Connections
from workly.storage.sqlite.tasks import SqliteTasks
from workly.storage.sqlite.thread import SqliteThread, SynchronousMode
from workly.storage.sqlite.upkeep import SqliteUpkeep
from workly.storage.sqlite.webhooks import SqliteWebhooks

_MIN_SQLITE = (3, 38, 0)  # ->> operator, RETURNING, UPDATE … FROM


@raises_workly_errors(interpret_sqlite_error)
class SqliteStorage:
    """Every storage role (workly/storage/contract) over one writer and one reader.

    ``synchronous`` applies to every write the API acknowledges (enqueue, queue and task
    changes): FULL (the default) means a 201 survives a power loss. The dispatcher's own
    bookkeeping (claims, attempt results) always commits with NORMAL: it survives a
    process crash, and what a power loss may roll back is delivered again (same
    webhook-id), which at-least-once allows. See docs/reliability.md.
    """

    dialect = "sqlite"

    def __init__(self, writer: SqliteThread, reader: SqliteThread, synchronous: SynchronousMode) -> None:
        bookkeeping: SynchronousMode = "OFF" if synchronous == "OFF" else "NORMAL"
        db = Connections(writer, reader, acknowledged=synchronous, bookkeeping=bookkeeping)
        self._threads = (reader, writer)
        self.database = SqliteDatabase(db)
        self.notifier = SqliteNotifier()
        self.tasks = SqliteTasks(db)
        self.dispatch = SqliteDispatch(db)
        self.queues = SqliteQueues(db)
        self.webhooks = SqliteWebhooks(db)
        self.operations = SqliteOperations(db)
        self.callbacks = SqliteCallbacks(db)
        self.schedules = SqliteSchedules(db)
        self.upkeep = SqliteUpkeep(db)
        self.retention = SqliteRetention(db)
        self.export = SqliteExport(db)
        self.history = SqliteHistory(db)
        self.tenants = SqliteTenants(db)
        self.keys = SqliteKeys(db)
        self.audit = SqliteAudit(db)
        self.sessions = SqliteSessions(db)
        self.catalogue = SqliteCatalogue(db)

    @classmethod
    async def open(
        cls, url: str, synchronous: SynchronousMode = "FULL", busy_timeout: float = 10.0
    ) -> SqliteStorage:
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise ConfigError(f"SQLite {sqlite3.sqlite_version} is too old: Workly needs 3.38 or newer")
        path = sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        _create_owner_only(path)
        common = ["PRAGMA foreign_keys = ON", f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}"]
        writer, reader = SqliteThread("writer"), SqliteThread("reader")
        try:
            await writer.open(path, [*common, "PRAGMA journal_mode = WAL"])
            await reader.open(path, [*common, "PRAGMA query_only = ON"])
        except BaseException:
            await reader.close()
            await writer.close()
            raise
        return cls(writer, reader, synchronous)

    async def close(self) -> None:
        for thread in self._threads:
            await thread.close()


def _create_owner_only(path: Path) -> None:
    """A new database file readable by its owner only, whatever the umask: it holds signing
    secrets and payloads. SQLite gives its -wal and -shm files the database's permissions. An
    existing file keeps the mode its operator gave it."""
    try:
        made = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(made, 0o600)  # the umask narrowed the mode, and may have narrowed it too much
    finally:
        os.close(made)
