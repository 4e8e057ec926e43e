"""The SQLite connection thread: a failed transaction, even a failed COMMIT, leaves the
connection ready for the next one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from workly.storage.sqlite_thread import SqliteThread


def _fail_at_commit(db: sqlite3.Connection) -> None:
    db.execute("INSERT INTO child (parent) VALUES (42)")  # the deferred foreign key fails at COMMIT


def _insert_parent(db: sqlite3.Connection) -> int:
    db.execute("INSERT INTO parent (id) VALUES (42)")
    return int(db.execute("SELECT count(*) FROM parent").fetchone()[0])


async def test_a_failed_commit_is_rolled_back_and_the_next_write_works(tmp_path: Path) -> None:
    thread = SqliteThread("test")
    await thread.open(tmp_path / "t.db", ["PRAGMA foreign_keys = ON"])
    try:
        await thread.run(
            lambda db: db.executescript(
                "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
                "CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);"
            )
        )
        with pytest.raises(sqlite3.IntegrityError):
            await thread.transaction("FULL", _fail_at_commit)
        assert await thread.transaction("FULL", _insert_parent) == 1
    finally:
        await thread.close()
