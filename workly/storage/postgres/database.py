"""The PostgreSQL database itself (Database): migrations under a lock, where the install is,
reachability, the server's clock, and the SQL functions' body limit."""

from __future__ import annotations

from datetime import datetime

from workly.errors import ConfigError
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.migrator import (
    Recorded,
    Repeatable,
    due_repeatables,
    is_latest,
    load_repeatables,
    pending,
    records_revisions,
    refuse_older_files,
    warn_of_unraised_changes,
)
from workly.storage.postgres.indexes import REINDEX_APPLICATION
from workly.storage.postgres.statements import Connection, Connections, execute, fetch, fetchval

MIGRATION_TIMEOUT = 3600.0  # seconds; see migrate()


@raises_workly_errors(interpret_postgres_error)
class PostgresDatabase:
    def __init__(self, db: Connections, schema_given: bool) -> None:
        """``schema_given``: WORKLY_DATABASE_SCHEMA was configured (else an install found in
        another schema is refused, not silently started afresh in public)."""
        self._pool = db.pool
        self._q = db.q
        self._schema = db.schema
        self._schema_given = schema_given

    async def ping(self) -> None:
        await self._pool.fetchval(self._q.ping.sql, timeout=2)

    async def needs_vacuum(self) -> bool:
        return not await fetchval(self._pool, self._q.autovacuum_enabled)

    async def database_now(self) -> datetime:
        now: datetime = await fetchval(self._pool, self._q.database_now)
        return now

    async def set_sql_limits(self, max_body_bytes: int) -> None:
        await execute(self._pool, self._q.set_sql_limits, max_body_bytes=max_body_bytes)

    async def migrate(self) -> list[int]:
        applied = []
        # READ COMMITTED whatever the server's default: a migration that counts a table
        # after locking it (0014) must see the writes committed while it waited.
        async with self._pool.acquire() as conn, conn.transaction(isolation="read_committed"):
            # Not bounded by the statement timeout: waiting for another process's migration,
            # or building an index over a large table, may rightly take minutes.
            await execute(conn, self._q.lock_migrations, max_seconds=MIGRATION_TIMEOUT)
            # The migrations' string literals are written with it on, whatever the role or
            # the database set.
            await conn.execute("SET LOCAL standard_conforming_strings = on")
            if not self._schema_given:
                await self._refuse_an_install_elsewhere(conn)
            if not await fetchval(conn, self._q.schema_exists, name=self._schema):
                await conn.execute(f'CREATE SCHEMA "{self._schema}"')  # a checked name
            await execute(conn, self._q.create_schema_version)
            current = await fetchval(conn, self._q.get_schema_version)
            todo = list(pending("postgres", current))
            if todo:
                # Every file runs after them: refused now rather than after an hour's migration.
                if records_revisions("postgres", current):
                    refuse_older_files("postgres", await self._recorded(conn))
                await self._refuse_definitions_owned_by_others(conn, load_repeatables("postgres"))
                # An index rebuild (indexes.py) holds a lock on its table that a migration's
                # DDL would wait for, with every enqueue and claim queued behind the DDL:
                # stop it; the next check starts again, after the migration.
                await execute(conn, self._q.cancel_index_rebuilds, application=REINDEX_APPLICATION)
            for migration in todo:
                if not migration.is_empty:
                    await conn.execute(migration.for_schema(self._schema), timeout=MIGRATION_TIMEOUT)
                await execute(conn, self._q.set_schema_version, version=migration.version)
                applied.append(migration.version)
            if is_latest("postgres", todo[-1].version if todo else current):
                await self._run_repeatables(conn, migrated=bool(todo))
        return applied

    async def _run_repeatables(self, conn: Connection, migrated: bool) -> None:
        """The repeatable files of a newer revision (all of them after migrations: see migrator.py),
        in the migrations' transaction and under their lock, in Workly's schema."""
        recorded = await self._recorded(conn)
        if not migrated:  # after migrations, every file runs
            warn_of_unraised_changes("postgres", recorded)
        due = due_repeatables("postgres", recorded, migrated)
        if due and not migrated:  # after migrations, checked before them
            await self._refuse_definitions_owned_by_others(conn, due)
        for repeatable in due:
            await conn.execute(repeatable.for_schema(self._schema), timeout=MIGRATION_TIMEOUT)
            await execute(
                conn,
                self._q.set_schema_repeatable,
                name=repeatable.name,
                revision=repeatable.revision,
                sha256=repeatable.sha256,
            )

    async def _recorded(self, conn: Connection) -> dict[str, Recorded]:
        rows = await fetch(conn, self._q.get_schema_repeatables)
        return {row["name"]: Recorded(row["revision"], row["sha256"]) for row in rows}

    async def _refuse_definitions_owned_by_others(self, conn: Connection, files: list[Repeatable]) -> None:
        """CREATE OR REPLACE needs the owner, and PostgreSQL would stop at the first function
        it may not replace with a bare "must be owner": name every one ``files`` define."""
        found = await fetch(
            conn,
            self._q.definitions_owned_by_others,
            schema=self._schema,
            functions=sorted(set().union(*(f.defines("FUNCTION") for f in files))),
            views=sorted(set().union(*(f.defines("VIEW") for f in files))),
        )
        if found:
            named = ", ".join(f"{row['name']} (owner {row['owner']})" for row in found)
            raise ConfigError(
                "Workly replaces its functions and views as it migrates, and the role that migrates "
                f"must own them (or inherit the privileges of their owner): {named}. Migrate as their "
                "owner, or make the migrating role their owner with ALTER FUNCTION/VIEW … OWNER TO "
                "(docs/operations.md)"
            )

    async def check_install_location(self) -> None:
        if not self._schema_given:
            async with self._pool.acquire() as conn:
                await self._refuse_an_install_elsewhere(conn)

    async def _refuse_an_install_elsewhere(self, conn: Connection) -> None:
        """With no schema configured, an install may be in another schema (where a search_path
        put it before the schema was a setting): starting afresh in public would hide its tasks."""
        found = await fetchval(conn, self._q.earlier_install_elsewhere)
        if found is not None:
            raise ConfigError(
                f"Workly's tables are in schema {found!r} and none are in public: set "
                f"WORKLY_DATABASE_SCHEMA={found} to use them (Workly no longer follows the search_path), "
                "or WORKLY_DATABASE_SCHEMA=public to start another install in public"
            )

    async def schema_version(self) -> int:
        async with self._pool.acquire() as conn:
            if not await fetchval(conn, self._q.schema_version_exists):
                return 0  # nothing installed: said without creating anything
            version: int = await fetchval(conn, self._q.get_schema_version)
            return version
