"""The database itself: migrations, reachability, where the install is, its clock."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Database(Protocol):
    async def migrate(self) -> list[int]:
        """Apply pending migrations; return the versions applied."""

    async def schema_version(self) -> int: ...

    async def ping(self) -> None:
        """Raise if the database cannot answer a trivial query."""

    async def check_install_location(self) -> None:
        """ConfigError when migrate() would refuse the database because Workly's tables are
        elsewhere in it (PostgreSQL with no schema configured and an install in another
        schema). Reads only."""

    async def database_now(self) -> datetime | None:
        """The database server's clock (PostgreSQL), to compare with this host's; None when
        the database is a file of this host (SQLite)."""

    async def needs_vacuum(self) -> bool:
        """Whether Workly should vacuum its tables itself (PostgreSQL with autovacuum off)."""

    async def set_sql_limits(self, max_body_bytes: int) -> None:
        """PostgreSQL: the largest body the SQL functions (enqueue_task, publish_event)
        accept, as this process's WORKLY_MAX_BODY_BYTES. SQLite has no SQL functions."""
