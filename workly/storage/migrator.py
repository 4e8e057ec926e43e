"""Migration files: ``workly/migrations/<dialect>/NNNN_name.sql``, same numbers per dialect."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from workly.storage.queries import Dialect

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(dialect: Dialect) -> list[Migration]:
    folder = resources.files("workly.migrations").joinpath(dialect)
    migrations = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            migrations.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    migrations.sort(key=lambda m: m.version)
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"{dialect} migrations are not numbered 1..n without gaps: {versions}")
    return migrations


def pending(dialect: Dialect, current: int) -> list[Migration]:
    return [m for m in load_migrations(dialect) if m.version > current]
