"""A webhook receiver on 127.0.0.1 that records every request and verifies signatures.

Responses are scripted per path: ``receiver.script("/flaky", [500, 500, 204])`` answers
the first three requests to /flaky with those statuses, then 204. Verification uses the
``standardwebhooks`` library, as a real receiver would.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when it arrived
    verified: bool | None  # None: no secret to verify with


class Receiver:
    def __init__(self, secret: str | None = None) -> None:
        self.requests: list[Received] = []
        self._scripts: dict[str, deque[int]] = defaultdict(deque)
        self._verifier = Webhook(secret) if secret else None
        self._arrived = asyncio.Condition()
        self.base_url = ""

    def script(self, path: str, statuses: list[int]) -> None:
        self._scripts[path].extend(statuses)

    def url(self, path: str) -> str:
        return self.base_url + path

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    async def wait_for(self, path: str, count: int, timeout: float = 15.0) -> list[Received]:
        async def enough() -> None:
            async with self._arrived:
                await self._arrived.wait_for(lambda: len(self.at(path)) >= count)

        await asyncio.wait_for(enough(), timeout)
        return self.at(path)

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = dict(request.headers)
        verified = None
        if self._verifier is not None:
            try:
                self._verifier.verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
        self.requests.append(Received(request.method, request.path, headers, body, time.time(), verified))
        async with self._arrived:
            self._arrived.notify_all()
        script = self._scripts.get(request.path)
        status = script.popleft() if script else 204
        return web.Response(status=status, text=None if status == 204 else f"status {status}")


@asynccontextmanager
async def running_receiver(secret: str | None = None) -> AsyncIterator[Receiver]:
    receiver = Receiver(secret)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", receiver._handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    receiver.base_url = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()
