"""Migration files: ``workly/migrations/<dialect>/NNNN_name.sql``, same numbers per dialect.

A migration may hold only comments (a dialect with nothing to do at that number says why):
it is recorded as applied without being run, since PostgreSQL cannot execute an empty script.
A PostgreSQL migration that must name Workly's schema writes ``@schema@``; it is run with the
schema's name, quoted, in its place.

Repeatable files: ``workly/migrations/<dialect>/repeatable/<name>.sql`` hold what is defined
whole rather than changed step by step (task_view; PostgreSQL's functions). Each begins with a
``-- revision: N`` line, raised by one whenever the file changes (a test compares each file's
versions in git). A file is run after the numbered migrations, in name order, when its revision
is above the one recorded in ``schema_repeatables`` (migrations 0016, 0017), and every file is run
whenever numbered migrations ran in the same call: one may drop what a file defines (PostgreSQL
refuses to change the type of a column a view reads), and the file then defines it again.

A revision, not a hash: during a rolling upgrade, a process of the older version that starts
must not put its older definitions back (an older version's numbered migrations are never
newer, so it runs no file then). A version whose numbered migrations are newer but whose file is
of a lower revision than the database ran (a release branched before a fix) is refused.

A file must be safe to run again (CREATE OR REPLACE; DROP … IF EXISTS first in SQLite), and may
use only what the files before it in name order define (a SQL-language function's body is
checked when it is created). A file renamed or split leaves its row behind unless a numbered
migration deletes it (as 0017 deletes ``functions``).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from workly.errors import ConfigError
from workly.storage.queries import Dialect

log = logging.getLogger("workly.migrations")
_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
_COMMENT = re.compile(r"--[^\n]*")
_REVISION = re.compile(r"\A-- revision: ([1-9]\d*)\n")
# What a PostgreSQL file defines in Workly's schema: the migrating role must own each one.
_DEFINES = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?(FUNCTION|VIEW)\s+@schema@\.(\w+)", re.IGNORECASE)


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
    sql: str  # with LF line ends, whatever the checkout wrote
    revision: int  # the number on the file's first line

    @classmethod
    def read(cls, name: str, text: str) -> Repeatable:
        sql = text.removeprefix("\ufeff").replace("\r\n", "\n")
        match = _REVISION.match(sql)
        if match is None:  # without one, a change would never run on an install
            raise RuntimeError(f"repeatable file {name!r} does not begin with '-- revision: N'")
        return cls(name, sql, int(match.group(1)))

    def for_schema(self, schema: str) -> str:
        return _for_schema(self.sql, schema)

    @property
    def sha256(self) -> str:
        """Of the file as written (before ``@schema@`` is replaced): recorded beside the
        revision, to tell a change made without raising it."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()

    def defines(self, kind: str) -> set[str]:
        """The names of the functions (``kind`` "FUNCTION") or views ("VIEW") it creates in
        Workly's schema."""
        return {name for found, name in _DEFINES.findall(self.sql) if found.upper() == kind}


@dataclass(frozen=True)
class Recorded:
    """What ``schema_repeatables`` holds of a file: the revision last run, and its content's hash."""

    revision: int
    sha256: str


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
        Repeatable.read(entry.name.removesuffix(".sql"), entry.read_text("utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    ]
    return sorted(found, key=lambda r: r.name)


def is_latest(dialect: Dialect, version: int) -> bool:
    """Whether a schema at ``version`` has every migration: only then do the repeatable files
    run (they define their objects over the latest tables, and schema_repeatables is there).
    A schema left part-way (tests of one migration stop before it) gets none, nor does one a
    newer version migrated (its own files, newer than these, stay)."""
    return version == len(load_migrations(dialect))


def records_revisions(dialect: Dialect, version: int) -> bool:
    """Whether a schema at ``version`` records the files' revisions (migration 0017)."""
    return version >= next(m.version for m in load_migrations(dialect) if m.name == "repeatable_revisions")


def due_repeatables(dialect: Dialect, recorded: Mapping[str, Recorded], migrated: bool) -> list[Repeatable]:
    """The repeatable files to run: those of a revision above the one ``recorded`` (a file
    never run is due), or all of them after numbered migrations ran (``migrated``: see the
    module's comment), unless one is older than what the database ran."""
    files = load_repeatables(dialect)
    if not migrated:
        return [r for r in files if r.revision > _ran(recorded, r.name)]
    refuse_older_files(dialect, recorded)
    return files


def refuse_older_files(dialect: Dialect, recorded: Mapping[str, Recorded]) -> None:
    """Refuse to migrate when a file is of a lower revision than the database ran: a version
    with newer migrations would run it after them (see the module's comment). Asked before
    the numbered migrations run, where the revisions are recorded, and after."""
    older = [r for r in load_repeatables(dialect) if r.revision < _ran(recorded, r.name)]
    if older:
        named = ", ".join(
            f"{r.name}.sql is revision {r.revision}, the database ran {_ran(recorded, r.name)}" for r in older
        )
        raise ConfigError(
            f"this Workly's repeatable files are older than those its database ran ({named}): "
            "a newer version migrated it, and this one, though its migrations are newer, lacks that "
            "version's changes to the files; run a version that has both"
        )


def warn_of_unraised_changes(dialect: Dialect, recorded: Mapping[str, Recorded]) -> list[str]:
    """Log the files whose content differs from what ran at the same revision (changed without
    their revision raised: no install runs the change), and return their names."""
    unraised = [
        r.name
        for r in load_repeatables(dialect)
        if r.name in recorded
        and recorded[r.name].revision == r.revision
        and recorded[r.name].sha256 != r.sha256
    ]
    for name in unraised:
        log.warning(
            "repeatable file %s.sql differs from the one the database ran at the same revision: it was "
            "changed without its '-- revision:' line raised, and the change is not run",
            name,
        )
    return unraised


def _ran(recorded: Mapping[str, Recorded], name: str) -> int:
    found = recorded.get(name)
    return 0 if found is None else found.revision
