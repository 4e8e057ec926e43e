"""The callback sender: turns finished tasks' callbacks into tasks (workly/callbacks.py).

The storage marks a task whose final outcome has a callback in the transaction that
records that outcome. The sender, woken when this process records such an outcome and
sweeping every few seconds for what other processes (or a crash) left, reads the marked
tasks, enqueues each callback (through the enqueuer: group commit, then work_available)
and clears the marks. A crash between the two only makes the next sweep enqueue the same
callbacks again, which their idempotency key turns into no-ops: none is lost or doubled.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from workly.callbacks import DueCallback, callback_task
from workly.clock import Clock
from workly.errors import StorageUnavailable
from workly.ids import new_task_id
from workly.metrics import Metrics
from workly.models import Enqueued, NewTask
from workly.periodic import WokenJob
from workly.storage.contract import CallbackStore

log = logging.getLogger("workly.callbacks")
Enqueue = Callable[[Sequence[NewTask]], Awaitable[list[Enqueued]]]


class CallbackSender:
    def __init__(
        self,
        storage: CallbackStore,
        enqueue: Enqueue,
        clock: Clock,
        *,
        sweep_interval: float = 5.0,
        # A callback can be ~3 times WORKLY_MAX_BODY_BYTES (the task's body and the answer,
        # base64): a small batch keeps one enqueue statement far from the database's limits.
        batch: int = 10,
        metrics: Metrics | None = None,
    ) -> None:
        self._storage = storage
        self._enqueue = enqueue
        self._batch = batch
        self._metrics = metrics or Metrics()
        self._job = WokenJob(clock, self._send, sweep_interval, "sending callbacks", log)

    def start(self) -> None:
        self._job.start()

    def wake(self) -> None:
        """Send what is due now (a result with a callback was just recorded)."""
        self._job.wake()

    async def stop(self) -> None:
        """Stop sweeping and finish the send in flight; what is still due stays marked in
        the database for the next sweep, here or in another process."""
        await self._job.stop()

    async def _send(self) -> None:
        await self.send_due()

    async def send_due(self) -> int:
        """Enqueue every due callback, a batch at a time; how many were enqueued."""
        sent = 0
        while not self._job.stopped:
            due = await self._storage.due_callbacks(self._batch)
            if not due:
                break
            try:
                sent += await self._enqueue_callbacks(due)
                done = due
            except StorageUnavailable:
                raise  # the database is away: the next run tries again
            except Exception as exc:
                # One callback the database refuses (too large for it, say) must not hold back
                # the others: each on its own, and what still fails stays due, and is logged.
                log.warning("enqueueing %d callbacks failed (%s); trying one at a time", len(due), exc)
                done = []
                for entry in due:
                    try:
                        sent += await self._enqueue_callbacks([entry])
                        done.append(entry)
                    except StorageUnavailable:
                        raise
                    except Exception as one:
                        log.error("the callback of task %s could not be enqueued: %s", entry.task.id, one)
            await self._storage.clear_callbacks([(entry.task.id, entry.seq) for entry in done])
            if len(done) < len(due) or len(due) < self._batch:
                break
        return sent

    async def _enqueue_callbacks(self, due: Sequence[DueCallback]) -> int:
        tasks = [task for entry in due if (task := callback_task(entry, new_task_id())) is not None]
        if not tasks:
            return 0
        stored = await self._enqueue(tasks)
        created = sum(1 for entry in stored if entry.created)
        self._metrics.callbacks.inc(created)
        return created
