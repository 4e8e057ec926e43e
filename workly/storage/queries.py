"""Named SQL blocks, loaded once per dialect from ``sql/<dialect>.sql``.

A block starts with a line ``-- name: <query_name>`` and runs to the next such
line. Both dialect files define the same names (a test checks it), so each backend
method reads as ``self._q.claim_tasks`` whatever the database.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal

Dialect = Literal["postgres", "sqlite"]
# Cross-process wake-ups (SQLite runs in one process and has nobody to notify), vacuum
# (SQLite updates in place and leaves no dead row versions to clean up), and the locks and
# counters that keep queue limits across processes (SQLite has one writer, which counts).
POSTGRES_ONLY = frozenset(
    {
        "announce_work",
        "autovacuum_enabled",
        "vacuum",
        "lock_queue_of_task",
        "delete_queue_releases",
        "lock_queues",
        "recount_running",
    }
)
_NAME_LINE = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


class Queries:
    def __init__(self, dialect: Dialect, blocks: dict[str, str]) -> None:
        self.dialect = dialect
        self._blocks = blocks

    def __getattr__(self, name: str) -> str:
        try:
            return self._blocks[name]
        except KeyError:
            raise AttributeError(f"no query named {name!r} in {self.dialect}.sql") from None

    def names(self) -> set[str]:
        return set(self._blocks)


def parse_blocks(text: str) -> dict[str, str]:
    blocks: dict[str, str] = {}
    matches = list(_NAME_LINE.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        name = match.group(1)
        if name in blocks:
            raise ValueError(f"query {name!r} is defined twice")
        blocks[name] = text[match.end() : end].strip()
    return blocks


@cache
def load_queries(dialect: Dialect) -> Queries:
    text = resources.files("workly.storage").joinpath("sql", f"{dialect}.sql").read_text("utf-8")
    return Queries(dialect, parse_blocks(text))
