"""Recording one delivery's result while the database is unavailable (down, restarting, too
slow, a deadlock broken): tried again for up to the lease margin, the lease checked between
tries, so a result that did commit (its answer lost with its connection) is not written
twice and one whose lease was taken over is let go."""

from __future__ import annotations

import logging
from collections.abc import Callable

from workly.batching import GroupCommitter
from workly.clock import Clock
from workly.dispatch.leases import extend_in_database
from workly.errors import StorageUnavailable
from workly.models import AttemptResult, ClaimedTask, RecordSummary
from workly.storage.contract import DispatchStore

log = logging.getLogger("workly.dispatch")
_RESULT_RETRY_FIRST = 0.05
_RESULT_RETRY_MOST = 1.0


class ResultSubmitter:
    def __init__(
        self,
        storage: DispatchStore,
        results: GroupCommitter[AttemptResult, RecordSummary],
        clock: Clock,
        lease_margin: float,
        stopping: Callable[[], bool],
    ) -> None:
        self._storage = storage
        self._results = results
        self._clock = clock
        self._lease_margin = lease_margin
        self._stopping = stopping

    async def submit(self, task: ClaimedTask, result: AttemptResult) -> None:
        """Record the result; while the database is unavailable (down, restarting, too slow,
        a deadlock broken), again, for up to the lease margin from the first failure, unless
        the process is stopping. The delivery stays in flight meanwhile. A failure may come
        after the write committed (an answer lost with its connection): so before each new
        try the task's lease is extended, which also tells whether it is still held. Held:
        the result was not written, and is sent again under the same lease. Not held: it was
        written (or the reaper took the task back): nothing more to do. A result given up
        leaves the task to its lease, and the reaper sends it again."""
        deadline: float | None = None  # none until the first failure
        pause = _RESULT_RETRY_FIRST
        while True:
            try:
                async with self._clock.timeout_at(deadline):  # a retry may wait on a dead connection
                    await self._results.submit(result)
                return
            except (StorageUnavailable, TimeoutError) as exc:
                if deadline is None:
                    deadline = self._clock.monotonic() + self._lease_margin
                    log.warning("recording the result of task %s failed (%s); retrying", task.id, exc)
                if self._stopping() or self._clock.monotonic() + pause >= deadline:
                    log.error("recording the result of task %s failed; its lease brings it back", task.id)
                    return
                await self._clock.sleep(pause)
                pause = min(pause * 2, _RESULT_RETRY_MOST)
                if not await self._still_leased(task, deadline):
                    return
            except Exception:
                # The task stays running under its lease; it is not lost, only late.
                log.exception("recording the result of task %s failed", task.id)
                return

    async def _still_leased(self, task: ClaimedTask, deadline: float) -> bool:
        """Whether ``task`` is still running under this delivery's lease (now extended); a
        database still unavailable counts as held, to be asked again after the next try."""
        held = await extend_in_database(self._storage, task, self._clock, self._lease_margin, deadline)
        if held is None:
            return True
        if not held:
            log.info("task %s: its result was recorded after all, or its lease taken over", task.id)
        return held
