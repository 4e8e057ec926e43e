"""The PostgreSQL backend: one asyncpg pool shared by one object per storage role.

Every query is a named block of sql/*.sql, bound by parameter name (storage/queries.py);
every public method of every part raises only Workly's errors (storage/interpret.py).
"""

from __future__ import annotations

import functools

import asyncpg

from workly.clock import Clock, SystemClock
from workly.database_url import DEFAULT_SCHEMA, check_schema_name, split_pool_size
from workly.json_text import from_json, to_json
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.access import PostgresAudit, PostgresKeys, PostgresSessions, PostgresTenants
from workly.storage.postgres.catalogue import PostgresCatalogue
from workly.storage.postgres.database import PostgresDatabase
from workly.storage.postgres.dispatch import PostgresDispatch
from workly.storage.postgres.export import PostgresExport
from workly.storage.postgres.history import PostgresHistory
from workly.storage.postgres.notifier import PostgresNotifier
from workly.storage.postgres.operations import PostgresCallbacks, PostgresOperations
from workly.storage.postgres.queues import PostgresQueues
from workly.storage.postgres.retention import PostgresRetention
from workly.storage.postgres.schedules import PostgresSchedules
from workly.storage.postgres.statements import Connections, use_schema
from workly.storage.postgres.tasks import PostgresTasks
from workly.storage.postgres.upkeep import PostgresUpkeep
from workly.storage.postgres.webhooks import PostgresWebhooks
from workly.storage.queries import postgres_queries


async def _keep_session(conn: asyncpg.Connection) -> None:
    """No reset query when a connection returns to the pool.

    asyncpg's default (UNLISTEN *, RESET ALL, …) is a round trip per release, for session
    state Workly never sets on pooled connections: LISTEN has a connection of its own and
    advisory locks are transaction-scoped. An open transaction is still rolled back.
    """


async def _init_connection(conn: asyncpg.Connection, schema: str) -> None:
    await conn.set_type_codec("json", encoder=to_json, decoder=from_json, schema="pg_catalog")
    await use_schema(conn, schema)


@raises_workly_errors(interpret_postgres_error)
class PostgresStorage:
    """Every storage role (workly/storage/contract) over one pool."""

    dialect = "postgres"

    def __init__(
        self, pool: asyncpg.Pool, dsn: str, schema: str | None = None, clock: Clock | None = None
    ) -> None:
        db = Connections(pool, postgres_queries(), dsn, schema or DEFAULT_SCHEMA)
        self._pool = pool
        self.database = PostgresDatabase(db, schema_given=schema is not None)
        self.notifier = PostgresNotifier(db, clock or SystemClock())
        self.tasks = PostgresTasks(db)
        self.dispatch = PostgresDispatch(db)
        self.queues = PostgresQueues(db)
        self.webhooks = PostgresWebhooks(db)
        self.operations = PostgresOperations(db)
        self.callbacks = PostgresCallbacks(db)
        self.schedules = PostgresSchedules(db)
        self.upkeep = PostgresUpkeep(db)
        self.retention = PostgresRetention(db)
        self.export = PostgresExport(db)
        self.history = PostgresHistory(db)
        self.tenants = PostgresTenants(db)
        self.keys = PostgresKeys(db)
        self.audit = PostgresAudit(db)
        self.sessions = PostgresSessions(db)
        self.catalogue = PostgresCatalogue(db)

    @classmethod
    async def open(
        cls, url: str, command_timeout: float = 10.0, schema: str | None = None, clock: Clock | None = None
    ) -> PostgresStorage:
        """``schema`` holds Workly's tables and functions (WORKLY_DATABASE_SCHEMA; None: not
        configured, so public, unless an earlier install is found elsewhere): every connection
        runs with it alone on its search_path, so no statement names it. ``clock``: what the
        notifier's reconnects and hellos wait on (the system's by default)."""
        dsn, size = split_pool_size(url)
        if schema is not None:
            check_schema_name(schema)
        pool = await asyncpg.create_pool(
            dsn,
            min_size=1,
            max_size=size,
            init=functools.partial(_init_connection, schema=schema or DEFAULT_SCHEMA),
            reset=_keep_session,
            command_timeout=command_timeout,
            # JIT compiles plans for analytics; for short queue statements it only adds latency.
            server_settings={"jit": "off", "application_name": "workly"},
        )
        return cls(pool, dsn, schema, clock)

    async def close(self) -> None:
        await self.notifier.close()
        await self._pool.close()
