"""Rebuilding the indexes that retention leaves bloated (PostgreSQL).

The tasks table churns as a sliding window: rows come in at the right end of every index
on an increasing key (seq, the time-ordered id, the creation order), and retention deletes
them at the left. A B-tree page is given back only once it is empty, and a few rows in each
page outlive their neighbours for good: failed and canceled tasks, which retention keeps.
So nearly every page keeps a resident or two, and the indexes grow with every task ever
stored, not with the tasks kept (the soak measured 8 % leaf density and 56 bytes of each
index per task delivered, docs/performance.md). VACUUM cannot fix that; a rebuild can.

``IndexRebuilder.rebuild_bloated`` finds the indexes of tasks, attempts and events (partial ones
of long-lived rows too: an idempotency key's bloats as the id's does) that are more than ``factor`` times the
size their entries need (plus ``slack_bytes``), through the pool, and only when there are
some opens a connection of its own to rebuild each with ``REINDEX INDEX CONCURRENTLY``,
which neither blocks nor is blocked by enqueues, claims and results (it waits for the
transactions that were running when it started, then swaps the new index in). One process
at a time: a session advisory lock on that connection. Its statements have no timeout (a
large index takes minutes), whatever the role or database sets, but it waits at most
``LOCK_WAIT`` for its table lock. A rebuild cut short (the process stopped, the server
restarted, ``workly migrate`` cancelled it to change the tables) leaves an invalid copy
behind; the next run drops it first.
"""

from __future__ import annotations

import logging

import asyncpg

from workly.storage.postgres.statements import Connection, Connections, fetch, use_schema
from workly.storage.queries import PostgresQueries

log = logging.getLogger("workly.housekeeping")
REINDEX_LOCK = 7337002  # pg_try_advisory_lock key; 7337001 is the migrations'
REINDEX_APPLICATION = "workly-reindex"  # its connection's application_name
BLOAT_FACTOR = 3.0
BLOAT_SLACK_BYTES = 8 << 20
LOCK_WAIT = "5s"  # for the table lock a rebuild takes; a DDL statement may be waiting


class IndexRebuilder:
    def __init__(self, db: Connections) -> None:
        self._pool = db.pool
        self._q = db.q
        self._dsn = db.dsn
        self._schema = db.schema
        self._may_reindex = True  # False once PostgreSQL said this role may not (it does not own them)

    async def rebuild_bloated(
        self, factor: float = BLOAT_FACTOR, slack_bytes: int = BLOAT_SLACK_BYTES
    ) -> list[str]:
        if not self._may_reindex:
            return []
        params = {"factor": factor, "slack_bytes": slack_bytes}
        if not await fetch(self._pool, self._q.index_leftovers) and not await fetch(
            self._pool, self._q.bloated_indexes, **params
        ):
            return []  # the usual answer: no connection of its own opened for nothing
        try:
            return await self._rebuild(params)
        except asyncpg.exceptions.InsufficientPrivilegeError as exc:
            self._may_reindex = False
            log.warning(
                "cannot rebuild bloated indexes (%s): Workly's role must own its tables, as the role "
                "that ran workly migrate does; set WORKLY_REINDEX_INTERVAL=0 to stop trying", exc
            )  # fmt: skip
            return []

    async def _rebuild(self, params: dict[str, float]) -> list[str]:
        conn = await asyncpg.connect(
            self._dsn,
            server_settings={
                "application_name": REINDEX_APPLICATION, "statement_timeout": "0", "lock_timeout": LOCK_WAIT,
            },
        )  # fmt: skip
        try:
            await use_schema(conn, self._schema)
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", REINDEX_LOCK):
                return []  # another process is at it
            await _drop_leftovers(conn, self._q)
            rebuilt = []
            for row in await fetch(conn, self._q.bloated_indexes, **params):
                await conn.execute(f"REINDEX INDEX CONCURRENTLY {_quoted(row['name'])}")
                # By name: the rebuilt index is a new relation under the old name.
                after = await conn.fetchval("SELECT pg_relation_size(to_regclass($1))", _quoted(row["name"]))
                log.info(
                    "rebuilt index %s: %.1f MiB → %.1f MiB (its entries need about %.1f MiB)",
                    row["name"], row["bytes"] / 2**20, (after or 0) / 2**20, row["needed"] / 2**20,
                )  # fmt: skip
                rebuilt.append(row["name"])
            return rebuilt
        finally:
            await conn.close()  # and with it the advisory lock


async def _drop_leftovers(conn: Connection, q: PostgresQueries) -> None:
    for row in await fetch(conn, q.index_leftovers):
        log.warning("dropping %s, left invalid by an interrupted rebuild", row["name"])
        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_quoted(row['name'])}")


def _quoted(name: str) -> str:
    """An identifier from the catalog, quoted (the search_path holds Workly's schema)."""
    return '"' + name.replace('"', '""') + '"'
