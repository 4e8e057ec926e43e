"""Wake-ups across processes: work committed in one process is claimed at once by the others."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

# How many tasks the SQL function enqueue_task stored, per queue, since the last call.
SqlEnqueued = Callable[[Mapping[str, int]], None]


class Notifier(Protocol):
    async def announce_work(self) -> None:
        """Tell other processes that work may be claimable (PostgreSQL: NOTIFY; SQLite: nothing).

        Called after the change committed (an enqueue, a retry, a resumed or changed
        queue), never inside its transaction.
        """

    async def listen_for_work(
        self,
        on_work: Callable[[], None],
        sql_poll_interval: float | None = None,
        on_sql_enqueued: SqlEnqueued | None = None,
    ) -> None:
        """Call ``on_work`` whenever another process announces work, until the storage closes.

        PostgreSQL keeps one dedicated LISTEN connection outside the pool and reconnects
        when it is lost; it returns once that connection is up (or after a few seconds of
        trying). With ``sql_poll_interval`` it also calls ``on_work`` within that many
        seconds of the commit of a task the SQL functions enqueued (docs/sql-enqueue.md), and
        ``on_sql_enqueued`` with how many enqueue_task stored per queue (each counted by the
        one process that found it). SQLite is single-process and never calls either.
        """
