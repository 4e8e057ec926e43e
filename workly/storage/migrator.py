"""Migration files: ``workly/migrations/<dialect>/NNNN_name.sql``, same numbers per dialect.

A migration may hold only comments (a dialect with nothing to do at that number says why):
it is recorded as applied without being run, since PostgreSQL cannot execute an empty script.
A PostgreSQL migration that must name Workly's schema writes ``@schema@``; it is run with the
schema's name, quoted, in its place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from workly.storage.queries import Dialect

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
_COMMENT = re.compile(r"--[^\n]*")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def for_schema(self, schema: str) -> str:
        """The script with ``@schema@`` naming ``schema`` (a checked name: see database_url)."""
        return self.sql.replace("@schema@", f'"{schema}"')

    @property
    def is_empty(self) -> bool:
        """Only comments and whitespace: nothing to run."""
        return not _COMMENT.sub("", self.sql).strip()


def load_migrations(dialect: Dialect, folder: Traversable | None = None) -> list[Migration]:
    """The dialect's migrations in order (from ``folder``, by default the packaged ones)."""
    folder = folder or resources.files("workly.migrations").joinpath(dialect)
    migrations = []
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE.match(entry.name)
        if match is None:  # a misnamed file would otherwise be skipped without a word
            raise RuntimeError(f"{dialect} migration {entry.name!r} is not named NNNN_<name>.sql")
        migrations.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    migrations.sort(key=lambda m: m.version)
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"{dialect} migrations are not numbered 1..n without gaps: {versions}")
    return migrations


def pending(dialect: Dialect, current: int) -> list[Migration]:
    return [m for m in load_migrations(dialect) if m.version > current]
