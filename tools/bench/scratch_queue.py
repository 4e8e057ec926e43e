"""The API as the benchmarks call it, and a queue a benchmark makes for itself and deletes
afterwards, never someone else's.

``BenchApi``: requests to the server with its token, through Workly's own HTTP client.
``async with scratch_queue(api, name, config): ...`` refuses a queue that exists (deleting
it afterwards would delete someone's tasks; a PUT would already have reset its settings),
makes it with ``config``, and at the end deletes it, checking that it is gone: an enqueue
still in the server when the first delete landed would have made it anew. The caller
cancels its own requests in flight before the block ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from workly.dispatch.http import HttpClient
from workly.loadtest.run import ANYWHERE


class BenchError(Exception):
    """The server refused what the benchmark needs."""


class BenchApi:
    def __init__(self, server: str, token: str | None, connections: int, max_body: int = 2048) -> None:
        """``connections``: kept open for reuse; ``max_body``: answer bytes read."""
        self.server = server
        self.headers = {"content-type": "application/json"} | (
            {"authorization": f"Bearer {token}"} if token else {}
        )
        self.client = HttpClient(
            policy=ANYWHERE, max_idle_per_origin=connections, max_idle=connections, max_body=max_body
        )

    async def call(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        """The answer's status and body."""
        response = await self.client.request(method, self.server + path, self.headers, body, timeout=60)
        return response.status, response.body

    async def status(self, method: str, path: str, body: bytes = b"") -> int:
        return (await self.call(method, path, body))[0]

    async def close(self) -> None:
        await self.client.close()


@asynccontextmanager
async def scratch_queue(api: BenchApi, name: str, config: dict[str, Any]) -> AsyncIterator[None]:
    path = f"/v1/queues/{name}"
    call = api.status
    if (found := await call("GET", path)) != 404:
        raise BenchError(
            f"queue {name} exists (HTTP {found}): delete it first (workly queue-delete {name} --yes)"
        )
    if (made := await call("PUT", path, json.dumps(config).encode())) != 201:
        raise BenchError(f"could not create queue {name}: HTTP {made}")
    try:
        yield
    finally:
        for _ in range(5):
            await call("DELETE", path)
            await asyncio.sleep(0.2)  # what the server had received commits in milliseconds
            if await call("GET", path) == 404:
                break
        else:
            print(f"queue {name} not deleted: workly queue-delete {name} --yes")


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel the requests still in flight and wait until they are gone."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
