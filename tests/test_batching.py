"""Group commit: items arriving during a flush share the next one; errors reach each caller."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from workly.batching import CoalescedCall, GroupCommitter
from workly.errors import StorageUnavailable


class Recorder:
    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.fail_on = fail_on

    async def flush(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        await self.gate.wait()
        if self.fail_on in items:
            raise RuntimeError("commit failed")
        return [item * 10 for item in items]


async def test_an_idle_item_is_flushed_alone_and_answered_after_commit() -> None:
    recorder = Recorder()
    committer = GroupCommitter(recorder.flush, max_batch=100)
    pending = asyncio.create_task(committer.submit(1))
    for _ in range(3):  # let submit start the flusher and the flusher call flush
        await asyncio.sleep(0)
    assert recorder.batches == [[1]]
    assert not pending.done()  # not answered before its commit
    recorder.gate.set()
    assert await pending == 10


async def test_items_arriving_during_a_flush_share_the_next_one() -> None:
    recorder = Recorder()
    committer = GroupCommitter(recorder.flush, max_batch=100)
    first = asyncio.create_task(committer.submit(1))
    await asyncio.sleep(0)
    later = [asyncio.create_task(committer.submit(n)) for n in range(2, 12)]
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await asyncio.gather(first, *later) == [n * 10 for n in range(1, 12)]
    assert recorder.batches == [[1], list(range(2, 12))]
    assert (committer.batches, committer.items) == (2, 11)


async def test_batches_are_capped() -> None:
    recorder = Recorder()
    recorder.gate.set()
    committer = GroupCommitter(recorder.flush, max_batch=4)
    results = await asyncio.gather(*(committer.submit(n) for n in range(10)))
    assert results == [n * 10 for n in range(10)]
    assert [len(b) for b in recorder.batches] == [4, 4, 2]


async def test_a_failed_shared_flush_is_retried_item_by_item_so_only_the_bad_item_fails() -> None:
    recorder = Recorder(fail_on=3)
    committer = GroupCommitter(recorder.flush, max_batch=2)
    tasks = [asyncio.create_task(committer.submit(n)) for n in range(1, 6)]
    await asyncio.sleep(0)
    recorder.gate.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert outcomes[:2] == [10, 20]
    assert isinstance(outcomes[2], RuntimeError)
    assert outcomes[3:] == [40, 50]
    assert [3, 4] in recorder.batches and [3] in recorder.batches and [4] in recorder.batches


async def test_drain_waits_for_pending_flushes() -> None:
    recorder = Recorder()
    committer = GroupCommitter(recorder.flush, max_batch=10)
    task = asyncio.create_task(committer.submit(1))
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_later(0.01, recorder.gate.set)
    await committer.drain()
    assert task.done() and task.result() == 10


async def test_coalesced_call_never_runs_twice_at_once_and_folds_triggers() -> None:
    gate, running, peak = asyncio.Event(), 0, 0

    async def call() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1

    errors: list[Exception] = []
    coalesced = CoalescedCall(call, errors.append)
    coalesced.trigger()
    await asyncio.sleep(0)
    for _ in range(10):  # all during the first call: they fold into one more call
        coalesced.trigger()
    gate.set()
    await coalesced.drain()
    assert (coalesced.calls, peak, errors) == (2, 1, [])


async def test_coalesced_call_reports_errors_and_keeps_working() -> None:
    failures = iter([RuntimeError("down"), None])

    async def call() -> None:
        failure = next(failures)
        if failure is not None:
            raise failure

    errors: list[Exception] = []
    coalesced = CoalescedCall(call, errors.append)
    coalesced.trigger()
    await coalesced.drain()
    coalesced.trigger()
    await coalesced.drain()
    assert coalesced.calls == 2
    assert [str(e) for e in errors] == ["down"]


async def test_a_flush_failing_for_everyone_is_not_split() -> None:
    calls: list[list[int]] = []

    async def database_down(items: Sequence[int]) -> list[int]:
        calls.append(list(items))
        raise ConnectionRefusedError("database down")

    committer = GroupCommitter(database_down, max_batch=10, split=lambda exc: not isinstance(exc, OSError))
    first = asyncio.create_task(committer.submit(0))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(committer.submit(n)) for n in range(1, 6)]
    outcomes = await asyncio.gather(first, *rest, return_exceptions=True)
    assert all(isinstance(o, ConnectionRefusedError) for o in outcomes)
    assert calls == [[0], [1, 2, 3, 4, 5]]  # one attempt per shared flush, not one per item


async def test_by_default_a_flush_is_split_unless_the_database_is_unavailable() -> None:
    """The enqueuer's and the dispatcher's rule: one by one helps a bad item, not a database
    that is down (every retry would fail again)."""
    calls: list[list[int]] = []

    def failing(error: Exception) -> Callable[[Sequence[int]], Awaitable[list[int]]]:
        async def flush(items: Sequence[int]) -> list[int]:
            calls.append(list(items))
            raise error

        return flush

    for error, flushes in ((StorageUnavailable("down"), 1), (ValueError("bad item"), 1 + 4)):
        calls.clear()
        committer = GroupCommitter(failing(error), max_batch=10)
        first = asyncio.create_task(committer.submit(0))
        await asyncio.sleep(0)  # the first flush starts alone; the next four share one
        rest = [asyncio.create_task(committer.submit(n)) for n in range(1, 5)]
        await asyncio.gather(first, *rest, return_exceptions=True)
        assert len(calls) == 1 + flushes, (error, calls)
