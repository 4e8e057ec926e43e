"""A queue a benchmark makes for itself and deletes afterwards, never someone else's.

``async with scratch_queue(call, name, config): ...`` refuses a queue that exists (deleting
it afterwards would delete someone's tasks; a PUT would already have reset its settings),
makes it with ``config``, and at the end deletes it, checking that it is gone: an enqueue
still in the server when the first delete landed would have made it anew. The caller
cancels its own requests in flight before the block ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

Call = Callable[[str, str, bytes], Awaitable[int]]  # method, path, body → HTTP status


class BenchError(Exception):
    """The server refused what the benchmark needs."""


@asynccontextmanager
async def scratch_queue(call: Call, name: str, config: dict[str, Any]) -> AsyncIterator[None]:
    path = f"/v1/queues/{name}"
    if (found := await call("GET", path, b"")) != 404:
        raise BenchError(
            f"queue {name} exists (HTTP {found}): delete it first (workly queue-delete {name} --yes)"
        )
    if (made := await call("PUT", path, json.dumps(config).encode())) != 201:
        raise BenchError(f"could not create queue {name}: HTTP {made}")
    try:
        yield
    finally:
        for _ in range(5):
            await call("DELETE", path, b"")
            await asyncio.sleep(0.2)  # what the server had received commits in milliseconds
            if await call("GET", path, b"") == 404:
                break
        else:
            print(f"queue {name} not deleted: workly queue-delete {name} --yes")


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel the requests still in flight and wait until they are gone."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
