"""Group commit: callers submit items one by one; items share transactions.

While one flush is in flight, new items wait and all go into the next one, so under
load the transaction count tracks the database's commit rate rather than the request
rate, and when idle an item is flushed at once (no timer, no added latency). Each
caller is answered only after the flush holding its item has committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class GroupCommitter(Generic[T, R]):
    def __init__(self, flush: Callable[[Sequence[T]], Awaitable[Sequence[R]]], max_batch: int) -> None:
        self._flush = flush
        self._max_batch = max_batch
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
