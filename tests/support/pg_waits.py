"""Waiting on what PostgreSQL shows, instead of sleeping, to order events between connections.

- ``wait_for_lock_waiters``: until exactly N other backends of this database wait on a
  lock (``pg_stat_activity.wait_event_type = 'Lock'``), so a test that holds a lock knows
  that the operation it started has reached it, and in which order several queue up.
- ``NotificationProbe``: a plain connection that LISTENs on a channel and keeps, in order,
  every payload it hears; it can also NOTIFY. Notifications reach every listener in commit
  order, so a marker sent after an event and seen by a listener proves that the listener
  has handled the event before it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

_POLL = 0.005

# Other backends of this database waiting on a heavyweight lock (a row, a tuple, a
# transaction id, a relation, ...): what an operation blocked behind a test's lock shows.
_LOCK_WAITERS = """
SELECT pid, application_name, wait_event, left(query, 120) AS query
FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
ORDER BY pid
"""


async def lock_waiters(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    """The backends of ``conn``'s database (other than its own) now waiting on a lock.

    ``pg_stat_activity`` is read once per transaction and then kept: a backend that
    connected since would be missing. ``conn`` is often the one holding the lock, inside
    its transaction, so the snapshot is dropped before every read.
    """
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    waiting: list[asyncpg.Record] = await conn.fetch(_LOCK_WAITERS)
    return waiting


async def wait_for_lock_waiters(conn: asyncpg.Connection, count: int, timeout: float = 10.0) -> None:
    """Return once exactly ``count`` other backends of ``conn``'s database wait on a lock.

    Start the blocked operations one at a time and wait for 1, then 2, ... waiters to
    know the order they queue up in. ``conn`` may be inside a transaction (the one holding
    the lock). Fails with the backends seen waiting after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        waiting = await lock_waiters(conn)
        if len(waiting) == count:
            return
        if time.monotonic() >= deadline:
            seen = "; ".join(
                f"pid {row['pid']} ({row['application_name']}, {row['wait_event']}): {row['query']!r}"
                for row in waiting
            )
            raise AssertionError(
                f"expected {count} backend(s) waiting on a lock within {timeout}s, "
                f"saw {len(waiting)}: {seen or 'none'}"
            )
        await asyncio.sleep(_POLL)


class NotificationProbe:
    """A connection of the test's own on one LISTEN/NOTIFY channel: hears and sends payloads.

    ``heard`` holds every payload delivered to it since it started listening, in order
    (its own NOTIFYs included: PostgreSQL delivers them to the sender's session too).
    """

    def __init__(self, conn: asyncpg.Connection, channel: str) -> None:
        self._conn = conn
        self._channel = channel
        self.heard: list[str] = []
        self._arrived = asyncio.Event()

    @classmethod
    async def listen(cls, url: str, channel: str) -> NotificationProbe:
        """Connect to ``url`` and LISTEN on ``channel``; it hears what commits after this returns."""
        conn = await asyncpg.connect(url)
        probe = cls(conn, channel)
        try:
            await conn.add_listener(channel, probe._on_notification)
        except BaseException:
            await conn.close()
            raise
        return probe

    def _on_notification(
        self,
        _conn: asyncpg.Connection[Any] | asyncpg.pool.PoolConnectionProxy[Any],
        _pid: int,
        _channel: str,
        payload: object,
        /,
    ) -> None:
        self.heard.append(str(payload))
        self._arrived.set()

    async def notify(self, payload: str) -> None:
        """NOTIFY the channel; committed (and so ordered after all that committed before) on return."""
        await self._conn.execute("SELECT pg_notify($1, $2)", self._channel, payload)

    async def wait_for(self, payload: str, after: int = 0, timeout: float = 10.0) -> int:
        """Wait until ``payload`` is heard at index ``after`` or later; return its index.

        Pass the index of an earlier payload + 1 to wait for one delivered (so committed)
        after it. Fails with everything heard so far after ``timeout`` seconds.
        """

        async def arrival() -> int:
            while True:
                for index in range(after, len(self.heard)):
                    if self.heard[index] == payload:
                        return index
                self._arrived.clear()
                await self._arrived.wait()

        try:
            return await asyncio.wait_for(arrival(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"{payload!r} not heard on {self._channel!r} (from index {after}) within {timeout}s; "
                f"heard: {self.heard!r}"
            ) from None

    async def close(self) -> None:
        await self._conn.close()
