"""Migration files: ``workly/migrations/<dialect>/NNNN_name.sql``, same numbers per dialect.

A migration may hold only comments (a dialect with nothing to do at that number says why):
it is recorded as applied without being run, since PostgreSQL cannot execute an empty script.
A PostgreSQL migration that must name Workly's schema writes ``@schema@``; it is run with the
schema's name, quoted, in its place.

Repeatable files: ``workly/migrations/<dialect>/repeatable/<name>.sql`` hold what is defined
whole rather than changed step by step (task_view; PostgreSQL's functions). Each begins with a
``-- revision: N`` line, raised by one whenever the file changes. A file is run after the
numbered migrations, in name order, when its revision is above the one recorded in
``schema_repeatables`` (migrations 0016, 0017), and also whenever numbered migrations ran in
the same call: one may drop what a file defines (PostgreSQL refuses to change the type of a
column a view reads), and the file then defines it again. A revision, not a hash: during a
rolling upgrade, a process of the older version that starts must not put its older
definitions back (an older version's numbered migrations are never newer, so it runs no file
then). A file must be safe to run again (CREATE OR REPLACE; DROP … IF EXISTS first in SQLite).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from workly.storage.queries import Dialect

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
_COMMENT = re.compile(r"--[^\n]*")
_REVISION = re.compile(r"\A-- revision: ([1-9]\d*)\n")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def for_schema(self, schema: str) -> str:
        """The script with ``@schema@`` naming ``schema`` (a checked name: see database_url)."""
        return _for_schema(self.sql, schema)

    @property
    def is_empty(self) -> bool:
        """Only comments and whitespace: nothing to run."""
        return not _COMMENT.sub("", self.sql).strip()


@dataclass(frozen=True)
class Repeatable:
    name: str  # the file's name without .sql: the key its revision is recorded under
    sql: str

    @property
    def revision(self) -> int:
        """The number on the file's first line (``-- revision: N``)."""
        match = _REVISION.match(self.sql)
        if match is None:  # without one, a change would never run on an install
            raise RuntimeError(f"repeatable file {self.name!r} does not begin with '-- revision: N'")
        return int(match.group(1))

    def for_schema(self, schema: str) -> str:
        return _for_schema(self.sql, schema)

    @property
    def sha256(self) -> str:
        """Of the file as written (before ``@schema@`` is replaced): recorded beside the
        revision, to say which content an install holds."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def _for_schema(sql: str, schema: str) -> str:
    return sql.replace("@schema@", f'"{schema}"')


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


def load_repeatables(dialect: Dialect, folder: Traversable | None = None) -> list[Repeatable]:
    """The dialect's repeatable files in name order (by default the packaged ones)."""
    folder = folder or resources.files("workly.migrations").joinpath(dialect, "repeatable")
    found = [
        Repeatable(entry.name.removesuffix(".sql"), entry.read_text("utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    ]
    for repeatable in found:
        _ = repeatable.revision  # refuses a file without one before anything runs
    return sorted(found, key=lambda r: r.name)


def is_latest(dialect: Dialect, version: int) -> bool:
    """Whether a schema at ``version`` has every migration: only then do the repeatable files
    run (they define their objects over the latest tables, and schema_repeatables is there).
    A schema left part-way (tests of one migration stop before it) gets none, nor does one a
    newer version migrated (its own files, newer than these, stay)."""
    return version == len(load_migrations(dialect))


def due_repeatables(dialect: Dialect, recorded: Mapping[str, int], migrated: bool) -> list[Repeatable]:
    """The repeatable files to run: those of a revision above the one ``recorded`` (name →
    revision; a file never run is due), or all of them after numbered migrations ran
    (``migrated``: see the module's comment)."""
    return [r for r in load_repeatables(dialect) if migrated or r.revision > recorded.get(r.name, 0)]
