"""Wake-ups between Workly processes on one PostgreSQL (Notifier): LISTEN/NOTIFY, only when
useful.

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
for such rows every ``sql_poll_interval`` seconds on its LISTEN connection (a pooled one
would cost three times the CPU per look), deletes them, wakes its dispatcher and announces
the work to the others. The looks double as that connection's liveness check. A look costs
CPU even when it finds nothing, so until the functions are in use in the database (its
statistics count rows put in sql_arrivals, or this process took some) a process looks only
every second: an install that never enqueues from SQL hardly pays for the feature.

Any role of the database may NOTIFY on the channel: what is heard is bounded. A payload that
is not ``work|hello|bye:<32 hex digits>`` is ignored, and at most ``MAX_PEERS`` other
processes are remembered (those heard from longest ago are forgotten first), each looked up
by its id, so a flood of made-up senders costs constant memory and constant time per
notification (50,000 of them once kept 50,000 peers and 15.5 s of the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import uuid
from collections.abc import Callable

import asyncpg

from workly.batching import CoalescedCall
from workly.clock import Clock
from workly.database_url import DEFAULT_SCHEMA
from workly.storage.contract.notifier import SqlEnqueued
from workly.storage.interpret import interpret_postgres_error, raises_workly_errors
from workly.storage.postgres.statements import Connections, use_schema

log = logging.getLogger("workly.storage")
CHANNEL = "workly_work"
UNUSED_LOOK_EVERY = 1.0  # seconds between looks for SQL arrivals while the functions are unused
MAX_PEERS = 256  # other processes remembered: far more than any deployment runs
_PAYLOAD = re.compile(r"(work|hello|bye):([0-9a-f]{32})")


def channel_of(schema: str) -> str:
    """The NOTIFY channel of the Workly install in ``schema``: installs in other schemas of
    the same database do not hear each other (``public`` keeps the channel it always had)."""
    if schema == DEFAULT_SCHEMA:
        return CHANNEL
    channel = f"{CHANNEL}.{schema}"
    # A channel name has at most 63 bytes; a long schema name is told apart by its hash.
    return channel if len(channel) <= 63 else f"{CHANNEL}.{hashlib.sha256(schema.encode()).hexdigest()[:32]}"


_RETRY_MIN, _RETRY_MAX = 0.5, 10.0
_QUICK_LOSS = 1.0  # seconds: a LISTEN connection lost sooner than this backs off before the next


@raises_workly_errors(interpret_postgres_error)
class PostgresNotifier:
    def __init__(self, db: Connections, clock: Clock, hello_every: float = 10.0) -> None:
        self._pool = db.pool
        self._dsn = db.dsn
        self._q = db.q
        self._schema = db.schema
        self._clock = clock
        self.channel = channel_of(db.schema)
        self._hello_every = hello_every
        self.id = uuid.uuid4().hex
        self._peers: dict[str, float] = {}  # other processes' ids → when last heard (monotonic)
        self._listener: asyncio.Task[None] | None = None
        self._sql_every: float | None = None
        self.sql_in_use = False  # the SQL functions have enqueued in this database
        self._sql_backoff = 0.0  # seconds between looks while they fail (0: they work)
        self._sql_retry_at = 0.0  # monotonic
        self._hello = CoalescedCall(lambda: self._notify("hello"), _log_failure)
        self.announced = 0
        self.sql_looks = 0  # looks for tasks enqueued from SQL, done
        self._connected = asyncio.Event()
        self._on_sql_enqueued: SqlEnqueued | None = None

    @property
    def peers(self) -> set[str]:
        horizon = self._horizon()
        return {peer for peer, heard in self._peers.items() if heard >= horizon}

    def _horizon(self) -> float:
        """A peer last heard before this (monotonic) has gone: three hellos missed."""
        return self._clock.monotonic() - 3 * self._hello_every

    async def announce_work(self) -> None:
        if self.peers:
            await self._notify("work")
            self.announced += 1

    async def listen_for_work(
        self,
        on_work: Callable[[], None],
        sql_poll_interval: float | None = None,
        on_sql_enqueued: SqlEnqueued | None = None,
        first_wait: float = 5.0,
    ) -> None:
        """Start listening; return once the first LISTEN connection is up and has said hello
        (or after ``first_wait`` seconds: the listener keeps trying in the background). A
        process that answers ready then hears, and is heard by, the processes already running.
        With ``sql_poll_interval``, also look that often for tasks the SQL functions enqueued."""
        self._sql_every = sql_poll_interval or None
        self._on_sql_enqueued = on_sql_enqueued
        self._listener = asyncio.create_task(self._listen(on_work), name="workly-listen")
        await self._clock.wait(self._connected, first_wait)

    async def close(self) -> None:
        if self._listener is None:
            return
        self._listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._listener
        await self._hello.drain()
        with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            async with self._clock.timeout_at(self._clock.monotonic() + 2):
                await self._notify("bye")

    async def _notify(self, kind: str) -> None:
        query = self._q.announce_work
        await self._pool.execute(
            query.sql, *query.args({"channel": self.channel, "payload": f"{kind}:{self.id}"})
        )

    async def _listen(self, on_work: Callable[[], None]) -> None:
        retry_in = _RETRY_MIN
        while True:
            try:
                conn = await asyncpg.connect(self._dsn, timeout=5)
            except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
                log.warning("LISTEN connection failed (%s); retrying in %.1fs", exc, retry_in)
                await self._clock.sleep(retry_in)
                retry_in = min(retry_in * 2, _RETRY_MAX)
                continue
            connected_at = self._clock.monotonic()
            try:
                await use_schema(conn, self._schema)  # for the looks for SQL arrivals
                if self._sql_every is not None and not self.sql_in_use:
                    self.sql_in_use = await conn.fetchval(self._q.sql_arrivals_used.sql, timeout=5)
                await conn.add_listener(
                    self.channel, lambda _c, _p, _ch, payload: self._heard(payload, on_work)
                )
                on_work()  # anything announced while this connection was down
                await self._until_lost(conn, on_work)
                log.warning("LISTEN connection lost; reconnecting")
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                log.warning("LISTEN connection failed (%s: %s); reconnecting", type(exc).__name__, exc)
            finally:
                if not conn.is_closed():
                    conn.terminate()
            if self._clock.monotonic() - connected_at < _QUICK_LOSS:
                # Lost as soon as it came up (a statement refused every time, as behind a
                # PgBouncer in transaction mode): wait as after a failed connect, not spin.
                await self._clock.sleep(retry_in)
                retry_in = min(retry_in * 2, _RETRY_MAX)
            else:
                retry_in = _RETRY_MIN

    def _heard(self, payload: str, on_work: Callable[[], None]) -> None:
        found = _PAYLOAD.fullmatch(payload)
        if found is None:
            return  # not a Workly process's: any role may NOTIFY on the channel
        kind, sender = found.groups()
        if sender == self.id:
            return  # this process's own enqueues woke its dispatcher directly
        last = self._peers.pop(sender, None)  # re-inserted last: the dict runs oldest first
        if kind == "bye":
            return
        now = self._clock.monotonic()
        newcomer = last is None or last < self._horizon()
        self._peers[sender] = now
        while len(self._peers) > MAX_PEERS:
            del self._peers[next(iter(self._peers))]
        if kind == "work":
            on_work()
        elif kind == "hello" and newcomer:
            self._hello.trigger()  # so the newcomer learns about this process at once

    async def _until_lost(self, conn: asyncpg.Connection, on_work: Callable[[], None]) -> None:
        """Say hello now and every ``hello_every`` s, and look for SQL arrivals every
        ``sql_poll_interval`` s; return when the connection is lost.

        Each round also runs a statement on the connection (the look, else a ping): a
        network loss can be silent.
        """
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _: lost.set())
        next_hello = self._clock.monotonic()
        while not lost.is_set():
            every = self._look_every()
            if self._clock.monotonic() >= next_hello:
                self._hello.trigger()
                await self._hello.drain()
                self._connected.set()
                next_hello = self._clock.monotonic() + self._hello_every
            wait = min(every, max(0.0, next_hello - self._clock.monotonic()))
            if self._sql_every is None:
                if await self._clock.wait(lost, wait):
                    return
                await conn.fetchval(self._q.ping.sql, timeout=5)
            else:  # a short sleep: cheaper than a wait, and a loss is noticed as soon
                await self._clock.sleep(wait)
                if lost.is_set():
                    return
                await self._take_sql_arrivals(conn, on_work)

    def _look_every(self) -> float:
        if self._sql_every is None:
            return self._hello_every
        return self._sql_every if self.sql_in_use else max(self._sql_every, UNUSED_LOOK_EVERY)

    async def _take_sql_arrivals(self, conn: asyncpg.Connection, on_work: Callable[[], None]) -> None:
        """Take what committed since the last look; wake this process and tell the others.
        A look that fails while the connection stays up (a statement timeout, a lock, a
        missing privilege) does not cost the LISTEN connection: the next looks back off, up
        to a second apart, and the failure and the recovery are logged once each."""
        if self._clock.monotonic() < self._sql_retry_at:
            return
        try:
            arrivals = await conn.fetch(self._q.take_sql_arrivals.sql, timeout=5)
        except (asyncpg.PostgresError, TimeoutError) as exc:
            if conn.is_closed():
                raise
            if not self._sql_backoff:
                log.warning("looking for tasks enqueued from SQL failed (%s: %s)", type(exc).__name__, exc)
            self._sql_backoff = min(1.0, max(2 * self._sql_backoff, 0.05))
            self._sql_retry_at = self._clock.monotonic() + self._sql_backoff
            return
        if self._sql_backoff:
            log.warning("looking for tasks enqueued from SQL works again")
            self._sql_backoff = 0.0
        self.sql_looks += 1
        if arrivals:
            self.sql_in_use = True
            enqueued = {row["queue"]: row["n"] for row in arrivals if row["queue"] is not None}
            if enqueued and self._on_sql_enqueued is not None:
                self._on_sql_enqueued(enqueued)
            on_work()
            try:
                await self.announce_work()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                log.warning("could not tell other Workly processes of new work: %s", exc)


def _log_failure(exc: Exception) -> None:
    log.warning("could not say hello to other Workly processes: %s", exc)
