"""Running named statements on a sqlite3 connection, and the migrations.

The functions every part of the SQLite backend runs on its connection thread: each binds a
named query's parameters by name (storage/queries.py checks them), so every part runs
statements the same way. ``Connections`` is what the parts share: the two threads and the
durability of each kind of write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from workly.breaker import HELD_UNTIL
from workly.json_text import from_json
from workly.storage import rows
from workly.storage.migrator import (
    Recorded,
    due_repeatables,
    is_latest,
    pending,
    records_revisions,
    refuse_older_files,
    warn_of_unraised_changes,
)
from workly.storage.queries import Query, sqlite_queries
from workly.storage.sqlite.thread import SqliteThread, SynchronousMode

Db = sqlite3.Connection
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    """Times are integer microseconds since the epoch. Integer arithmetic: a float would
    lose microseconds far from 1970."""
    return (value - _EPOCH) // _MICROSECOND


def from_us(value: Any) -> datetime:
    return _EPOCH + timedelta(microseconds=int(value))


def _as_headers(value: Any) -> dict[str, str]:
    return dict(from_json(value))


DECODERS = rows.Decoders(time=from_us, headers=_as_headers)
HELD_US = to_us(HELD_UNTIL)


@dataclass(frozen=True, slots=True)
class Connections:
    """What every part of the backend runs on. ``acknowledged``: the durability of the writes
    the API answers for (WORKLY_SQLITE_SYNCHRONOUS); ``bookkeeping``: of the dispatcher's own
    (claims, results, upkeep), NORMAL at most (docs/reliability.md)."""

    writer: SqliteThread
    reader: SqliteThread
    acknowledged: SynchronousMode
    bookkeeping: SynchronousMode


def execute(db: Db, query: Query, params: Mapping[str, Any] | None = None) -> sqlite3.Cursor:
    return db.execute(query.sql, query.check(params or {}))


def execute_many(db: Db, query: Query, rows_of_params: Sequence[Mapping[str, Any]]) -> None:
    db.executemany(query.sql, [query.check(params) for params in rows_of_params])


# A result row by column name. Not sqlite3.Row: its lookup by name compares the name with
# every column's, ignoring case, on every read; a dict made once per row is cheaper to read
# a task's 30 columns from (docs/performance.md).
SqliteRow = dict[str, Any]


def fetchall(db: Db, query: Query, params: Mapping[str, Any] | None = None) -> list[SqliteRow]:
    cursor = execute(db, query, params)
    found = cursor.fetchall()
    return _by_name(cursor, found) if found else []


def fetchone(db: Db, query: Query, params: Mapping[str, Any] | None = None) -> SqliteRow | None:
    cursor = execute(db, query, params)
    row = cursor.fetchone()
    return None if row is None else _by_name(cursor, [row])[0]


def _by_name(cursor: sqlite3.Cursor, found: list[tuple[Any, ...]]) -> list[SqliteRow]:
    names = [column[0] for column in cursor.description]
    if len(set(names)) == len(names):
        return [dict(zip(names, row, strict=True)) for row in found]
    # A name twice (t.*, q.name): the first column's value, as sqlite3.Row gave.
    names.reverse()
    return [dict(zip(names, reversed(row), strict=True)) for row in found]


def migrate(db: Db) -> list[int]:
    """Apply the pending migrations, then the repeatable files due (inside the caller's BEGIN
    IMMEDIATE); the versions applied."""
    q = sqlite_queries()
    execute(db, q.lock_migrations)
    execute(db, q.create_schema_version)
    applied = []
    version = current_version(db)
    todo = pending("sqlite", version)
    if todo and records_revisions("sqlite", version):
        refuse_older_files("sqlite", _recorded(db))  # before the migrations: see migrator.py
    for migration in todo:
        for statement in split_statements(migration.sql):  # none in a file of comments only
            db.execute(statement)
        execute(db, q.set_schema_version, {"version": migration.version})
        applied.append(migration.version)
        version = migration.version
    if not is_latest("sqlite", version):
        return applied
    # The repeatable files of a newer revision (all of them after migrations: see migrator.py).
    recorded = _recorded(db)
    if not applied:  # after migrations, every file runs
        warn_of_unraised_changes("sqlite", recorded)
    for repeatable in due_repeatables("sqlite", recorded, migrated=bool(applied)):
        for statement in split_statements(repeatable.sql):
            db.execute(statement)
        row = {"name": repeatable.name, "revision": repeatable.revision, "sha256": repeatable.sha256}
        execute(db, q.set_schema_repeatable, row)
    return applied


def _recorded(db: Db) -> dict[str, Recorded]:
    rows = fetchall(db, sqlite_queries().get_schema_repeatables)
    return {row["name"]: Recorded(row["revision"], row["sha256"]) for row in rows}


def schema_version(db: Db) -> int:
    found = fetchone(db, sqlite_queries().schema_version_exists)
    return current_version(db) if found is not None else 0  # nothing installed: nothing made


def current_version(db: Db) -> int:
    row = fetchone(db, sqlite_queries().get_schema_version)
    assert row is not None
    version: int = row["version"]
    return version


def split_statements(script: str) -> list[str]:
    """Split a migration into statements (sqlite3 runs one per execute)."""
    statements, current = [], []
    for line in script.splitlines():
        current.append(line)
        candidate = "\n".join(current).strip()
        if candidate.endswith(";") and sqlite3.complete_statement(candidate):
            statements.append(candidate)
            current = []
    tail = "\n".join(current).strip()
    if tail and not all(line.strip().startswith("--") or not line.strip() for line in current):
        statements.append(tail)
    return statements
