"""A new SQLite database, and the files SQLite makes beside it, are readable by their owner
only (they hold signing secrets and payloads); an existing file keeps its operator's mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.storage.helpers import new
from tests.support.clock import VirtualClock
from workly.storage.sqlite import SqliteStorage


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    before = os.umask(0o022)  # the usual one: new files 0644
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("permissive_umask")
async def test_a_new_database_and_its_wal_are_the_owners_only(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "workly.db"
    storage = await SqliteStorage.open(f"sqlite:///{path}")
    try:
        await storage.database.migrate()
        await storage.tasks.enqueue([new()], VirtualClock().now())
        made = [path, path.with_name("workly.db-wal"), path.with_name("workly.db-shm")]
        assert {p.name: mode(p) for p in made} == {p.name: 0o600 for p in made}
    finally:
        await storage.close()


@pytest.mark.usefixtures("permissive_umask")
async def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "workly.db"
    path.touch()
    path.chmod(0o640)  # an operator's group may read it
    storage = await SqliteStorage.open(f"sqlite:///{path}")
    try:
        await storage.database.migrate()
    finally:
        await storage.close()
    assert mode(path) == 0o640
