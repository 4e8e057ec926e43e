"""The bulk operation runner (the use cases are bulk_operations.py): works the operations.

An operation is stored first (``OperationStore.create_operation``) and answered at once (202);
the runner then takes it under a lease and applies it chunk by chunk, each chunk and the
progress in one transaction (workly/operations.py). The runner runs in every dispatching
process: a process that dies mid-operation leaves its lease to expire, and whichever
runner looks next resumes after the last chunk that committed. Between chunks the runner
yields, so claims and enqueues interleave with it; each retried chunk ends in
work_available, so its tasks are delivered while the operation goes on.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from workly.clock import Clock
from workly.lifecycle import tenant_hash
from workly.metrics import Metrics
from workly.operations import CHUNK, Operation
from workly.periodic import WokenJob
from workly.storage.contract import OperationStore

log = logging.getLogger("workly.operations")


class OperationRunner:
    def __init__(
        self,
        storage: OperationStore,
        clock: Clock,
        work_available: Callable[[], None],
        *,
        poll_interval: float = 1.0,
        lease_seconds: float = 15.0,
        chunk: int = CHUNK,
        metrics: Metrics | None = None,
    ) -> None:
        """``lease_seconds``: how long a runner holds an operation without finishing a
        chunk (a chunk takes far less); after it, another runner may resume it."""
        self._storage = storage
        self._clock = clock
        self._work_available = work_available
        self._lease_seconds = lease_seconds
        self._chunk = chunk
        self._metrics = metrics or Metrics()
        self._token = uuid.uuid4().hex
        self._job = WokenJob(clock, self.run_pending, poll_interval, "bulk operations", log)

    def start(self) -> None:
        self._job.start()

    def wake(self) -> None:
        """Look for work now (an operation was just created here)."""
        self._job.wake()

    async def stop(self) -> None:
        """Stop after the chunk in flight and give the operation back: it resumes in another
        process, or here after a restart, at once (after a crash: once its lease expires)."""
        await self._job.stop()

    async def run_pending(self) -> None:
        """Work every operation no runner holds, one after the other, to its end."""
        while not self._job.stopped:
            operation = await self._storage.take_operation(
                self._clock.now(), self._token, self._lease_seconds
            )
            if operation is None:
                return
            log.info("operation %s (%s %s) started", operation.id, operation.action, _shown(operation))
            await self._work(operation)

    async def _work(self, operation: Operation) -> None:
        try:
            await self._work_chunks(operation)
        finally:
            if self._job.stopped:  # shutting down between chunks: let whoever is next go on at once
                await self._storage.release_operation(operation.id, self._token)

    async def _work_chunks(self, operation: Operation) -> None:
        while not self._job.stopped:
            done = await self._storage.run_operation_chunk(
                operation.id, self._token, self._clock.now(), self._lease_seconds, self._chunk
            )
            if done is None:  # taken over, after this runner's lease expired
                log.warning("operation %s: lease lost, another runner goes on with it", operation.id)
                return
            progress = done.operation
            self._metrics.operation_tasks.labels(operation.action, "changed").inc(done.changed)
            if done.changed and operation.action in ("retry", "replay"):
                self._work_available()
            if progress.state != "running":
                self._metrics.operation_tasks.labels(operation.action, "skipped").inc(progress.skipped)
                log.info(
                    "operation %s %s: %d matched, %d changed, %d skipped",
                    operation.id, progress.state, progress.matched, progress.changed, progress.skipped,
                )  # fmt: skip
                return
            await asyncio.sleep(0)  # let claims, results and enqueues in between chunks


def _shown(operation: Operation) -> dict[str, Any]:
    """An operation's filter as logged: an erase names its tenant by its hash only."""
    shown = operation.filter.given()
    if operation.action == "erase":
        shown["tenant"] = tenant_hash(str(shown.get("tenant")))
    return shown
