"""Group commit: callers submit items one by one; items share transactions.

While one flush is in flight, new items wait and all go into the next one, so under
load the transaction count tracks the database's commit rate rather than the request
rate, and when idle an item is flushed at once (no timer, no added latency). Each
caller is answered only after the flush holding its item has committed. When a shared
flush fails, its items are flushed again one by one, so one bad item fails alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from workly.errors import StorageUnavailable

T = TypeVar("T")
R = TypeVar("R")


class GroupCommitter(Generic[T, R]):
    def __init__(
        self,
        flush: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        max_batch: int,
        split: Callable[[Exception], bool] = lambda exc: not isinstance(exc, StorageUnavailable),
    ) -> None:
        """``split(exc)``: whether a failed shared flush is retried item by item. By default
        yes for a bad item, no when the database is unavailable, where every retry would
        fail again (the enqueuer's and the dispatcher's rule)."""
        self._flush = flush
        self._max_batch = max_batch
        self._split = split
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.batches = 0
        self.items = 0

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                await self._flush_batch(batch)
        finally:
            self._flusher = None

    async def _flush_batch(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self._flush([item for item, _ in batch])
        except Exception as exc:
            if len(batch) > 1 and self._split(exc):
                # One bad item must not fail its neighbours: retry each alone.
                for single in batch:
                    await self._flush_batch([single])
                return
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        self.batches += 1
        self.items += len(batch)
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def drain(self) -> None:
        """Wait until everything submitted so far is flushed."""
        while self._flusher is not None:
            await asyncio.shield(self._flusher)


class CoalescedCall:
    """An async call that is never in flight twice: triggers during a call fold into one more.

    Used for wake-ups: however many commits trigger it, at most one NOTIFY is in flight
    per process, and one more follows if anything committed meanwhile.
    """

    def __init__(self, call: Callable[[], Awaitable[None]], on_error: Callable[[Exception], None]) -> None:
        self._call = call
        self._on_error = on_error
        self._running: asyncio.Task[None] | None = None
        self._again = False
        self.calls = 0

    def trigger(self) -> None:
        if self._running is None:
            self._running = asyncio.create_task(self._run())
        else:
            self._again = True

    async def _run(self) -> None:
        try:
            while True:
                self._again = False
                self.calls += 1
                try:
                    await self._call()
                except Exception as exc:
                    self._on_error(exc)
                if not self._again:
                    return
        finally:
            self._running = None

    async def drain(self) -> None:
        while self._running is not None:
            await asyncio.shield(self._running)
