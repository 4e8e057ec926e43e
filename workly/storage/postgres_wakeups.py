"""Wake-ups between Workly processes on one PostgreSQL: LISTEN/NOTIFY, only when useful.

After an enqueue commits, its process wakes its own dispatcher directly and announces
the work (``NOTIFY workly_work``) so that other processes claim it at once instead of
at their next poll. Each process LISTENs on one connection of its own (a pooled one
could not keep the session state) and reconnects when it is lost.

A NOTIFY is a transaction and a round trip, so one is sent only when another process
is listening: every process says hello when it starts listening and every
``hello_every`` seconds, answers a newcomer's hello, and says goodbye when it closes.
A process alone (one ``workly serve``) sends no announcements at all.

Tasks the SQL functions enqueue (enqueue_task, publish_event, in the application's own
transaction) send no NOTIFY: that would serialize the application's commits. Each leaves a
row in ``sql_arrivals``, visible once its transaction commits; a dispatching process looks
for such rows every ``sql_poll_interval`` seconds, deletes them, wakes its dispatcher and
announces the work to the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Callable

import asyncpg

from workly.batching import CoalescedCall
from workly.storage.queries import PostgresQueries

log = logging.getLogger("workly.storage")
CHANNEL = "workly_work"


def channel_of(schema: str) -> str:
    """The NOTIFY channel of the Workly install in ``schema``: installs in other schemas of
    the same database do not hear each other (``public`` keeps the channel it always had)."""
    if schema == "public":
        return CHANNEL
    channel = f"{CHANNEL}.{schema}"
    # A channel name has at most 63 bytes; a long schema name is told apart by its hash.
    return channel if len(channel) <= 63 else f"{CHANNEL}.{hashlib.sha256(schema.encode()).hexdigest()[:32]}"


_RETRY_MIN, _RETRY_MAX = 0.5, 10.0


class PostgresWakeups:
    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        queries: PostgresQueries,
        schema: str = "public",
        hello_every: float = 10.0,
    ) -> None:
        self._pool = pool
        self._dsn = dsn
        self._q = queries
        self._schema = schema
        self.channel = channel_of(schema)
        self._hello_every = hello_every
        self.id = uuid.uuid4().hex
        self._peers: dict[str, float] = {}  # other processes' ids → when last heard (monotonic)
        self._listener: asyncio.Task[None] | None = None
        self._arrivals: asyncio.Task[None] | None = None
        self._hello = CoalescedCall(lambda: self._notify("hello"), _log_failure)
        self.announced = 0
        self.sql_looks = 0  # looks for tasks enqueued from SQL, done
        self._connected = asyncio.Event()

    @property
    def peers(self) -> set[str]:
        horizon = time.monotonic() - 3 * self._hello_every
        return {peer for peer, heard in self._peers.items() if heard >= horizon}

    async def announce_work(self) -> None:
        if self.peers:
            await self._notify("work")
            self.announced += 1

    async def listen(
        self, on_work: Callable[[], None], sql_poll_interval: float | None = None, first_wait: float = 5.0
    ) -> None:
        """Start listening; return once the first LISTEN connection is up and has said hello
        (or after ``first_wait`` seconds: the listener keeps trying in the background). A
        process that answers ready then hears, and is heard by, the processes already running.
        With ``sql_poll_interval``, also look that often for tasks the SQL functions enqueued."""
        self._listener = asyncio.create_task(self._listen(on_work), name="workly-listen")
        if sql_poll_interval:
            self._arrivals = asyncio.create_task(
                self._watch_sql_arrivals(on_work, sql_poll_interval), name="workly-sql-arrivals"
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._connected.wait(), timeout=first_wait)

    async def close(self) -> None:
        if self._arrivals is not None:
            self._arrivals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._arrivals
        if self._listener is None:
            return
        self._listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._listener
        await self._hello.drain()
        with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            await asyncio.wait_for(self._notify("bye"), timeout=2)

    async def _notify(self, kind: str) -> None:
        query = self._q.announce_work
        await self._pool.execute(
            query.sql, *query.args({"channel": self.channel, "payload": f"{kind}:{self.id}"})
        )

    async def _watch_sql_arrivals(self, on_work: Callable[[], None], every: float) -> None:
        query = self._q.take_sql_arrivals
        failing = False
        while True:
            await asyncio.sleep(every)
            try:
                taken = await self._pool.fetchval(query.sql, timeout=5)
                self.sql_looks += 1
                if taken:
                    on_work()
                    await self.announce_work()
                failing = False
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                if not failing:  # once per outage; the dispatcher's idle poll still claims
                    log.warning("cannot look for tasks enqueued by SQL (%s); retrying", exc)
                failing = True
                await asyncio.sleep(min(1.0, 100 * every))

    async def _listen(self, on_work: Callable[[], None]) -> None:
        retry_in = _RETRY_MIN
        while True:
            try:
                conn = await asyncpg.connect(self._dsn, timeout=5)
            except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
                log.warning("LISTEN connection failed (%s); retrying in %.1fs", exc, retry_in)
                await asyncio.sleep(retry_in)
                retry_in = min(retry_in * 2, _RETRY_MAX)
                continue
            retry_in = _RETRY_MIN
            try:
                await conn.add_listener(
                    self.channel, lambda _c, _p, _ch, payload: self._heard(payload, on_work)
                )
                on_work()  # anything announced while this connection was down
                await self._until_lost(conn)
                log.warning("LISTEN connection lost; reconnecting")
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                log.warning("LISTEN connection failed (%s); reconnecting", exc)
            finally:
                if not conn.is_closed():
                    conn.terminate()

    def _heard(self, payload: str, on_work: Callable[[], None]) -> None:
        kind, _, sender = payload.partition(":")
        if sender == self.id or not sender:
            return  # this process's own enqueues woke its dispatcher directly
        if kind == "bye":
            self._peers.pop(sender, None)
            return
        newcomer = sender not in self.peers
        self._peers[sender] = time.monotonic()
        if kind == "work":
            on_work()
        elif kind == "hello" and newcomer:
            self._hello.trigger()  # so the newcomer learns about this process at once

    async def _until_lost(self, conn: asyncpg.Connection) -> None:
        """Say hello now and every ``hello_every`` s; return when the connection is lost.

        Each round also pings the connection: a network loss can be silent.
        """
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _: lost.set())
        while not lost.is_set():
            self._hello.trigger()
            await self._hello.drain()
            self._connected.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), timeout=self._hello_every)
                return
            await conn.fetchval(self._q.ping.sql, timeout=5)


def _log_failure(exc: Exception) -> None:
    log.warning("could not say hello to other Workly processes: %s", exc)
