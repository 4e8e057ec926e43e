"""Idle keep-alive connections: per origin, with an idle expiry and a cap over all origins.

A connection waits here between exchanges. It expires after ``idle_timeout`` seconds,
or sooner when its server said it keeps idle connections for less (``Keep-Alive:
timeout=N``, less a second, so that Workly drops it before the server does rather than
writing into a close). Expired connections are closed by a timer even when nothing else
is sent, and at most ``max_total`` wait in all: beyond that the longest idle one goes.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from workly.clock import Clock, SystemClock
from workly.dispatch.http.connection import Connection

Origin = tuple[str, str, int]  # scheme, host, port
_SERVER_MARGIN = 1.0  # seconds before the server's own idle timeout


class IdlePool:
    def __init__(
        self,
        max_per_origin: int = 64,
        max_total: int = 256,
        idle_timeout: float = 15.0,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: whose monotonic time idle connections age by (the system's by default)."""
        self._clock = clock or SystemClock()
        self._max_per_origin = max_per_origin
        self._max_total = max_total
        self._idle_timeout = idle_timeout
        self._by_origin: dict[Origin, list[Connection]] = {}
        self._origin_of: OrderedDict[Connection, Origin] = OrderedDict()  # longest idle first
        self._sweep: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._origin_of)

    def take(self, origin: Origin) -> Connection | None:
        """The most recently used live connection to ``origin``, if one is waiting."""
        idle = self._by_origin.get(origin)
        now = self._clock.monotonic()
        while idle:
            conn = idle.pop()
            del self._origin_of[conn]
            if now < self._expiry(conn) and conn.alive():
                return conn
            conn.close()
        self._by_origin.pop(origin, None)
        return None

    def put(self, origin: Origin, conn: Connection) -> None:
        idle = self._by_origin.setdefault(origin, [])
        if len(idle) >= self._max_per_origin:
            conn.close()
            return
        conn.idle_since = self._clock.monotonic()
        idle.append(conn)
        self._origin_of[conn] = origin
        while len(self._origin_of) > self._max_total:
            self._drop(next(iter(self._origin_of)))
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(self._sweep_every(), self._expire)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in self._origin_of:
            conn.close()
        self._origin_of.clear()
        self._by_origin.clear()

    def _expiry(self, conn: Connection) -> float:
        keep = self._idle_timeout
        if conn.keep_alive is not None:
            keep = min(keep, max(0.0, conn.keep_alive - _SERVER_MARGIN))
        return conn.idle_since + keep

    def _sweep_every(self) -> float:
        return min(1.0, self._idle_timeout / 2) or 0.01

    def _expire(self) -> None:
        self._sweep = None
        now = self._clock.monotonic()
        for conn in [c for c in self._origin_of if now >= self._expiry(c) or not c.alive()]:
            self._drop(conn)
        if self._origin_of:
            self._sweep = asyncio.get_running_loop().call_later(self._sweep_every(), self._expire)

    def _drop(self, conn: Connection) -> None:
        origin = self._origin_of.pop(conn)
        idle = self._by_origin[origin]
        idle.remove(conn)
        if not idle:
            del self._by_origin[origin]
        conn.close()
