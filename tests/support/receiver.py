"""A webhook receiver on 127.0.0.1 that records every request and verifies signatures.

Responses are scripted per path: ``receiver.script("/flaky", [500, 500, 204])`` answers
the first three requests to /flaky with those statuses, then 204. Verification uses the
``standardwebhooks`` library, as a real receiver would.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ssl
import time
from collections import Counter, defaultdict, deque
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
        self._delays: dict[str, float] = {}
        self._gates: dict[str, asyncio.Event] = {}
        self._redirects: dict[str, str] = {}
        self._bodies: dict[str, bytes] = {}
        self.in_flight = 0
        self.peak_in_flight = 0
        self.in_flight_at: Counter[str] = Counter()  # per path
        self.peak_at: Counter[str] = Counter()  # the most ever in flight at once, per path
        self._secret = secret
        self._arrived = asyncio.Condition()
        self.base_url = ""

    def script(self, path: str, statuses: list[int]) -> None:
        self._scripts[path].extend(statuses)

    def answer_with(self, path: str, body: bytes) -> None:
        """Send ``body`` (application/octet-stream) with every answer to ``path``."""
        self._bodies[path] = body

    def redirect(self, path: str, location: str) -> None:
        """Answer requests to ``path`` with 302 Found to ``location``."""
        self._redirects[path] = location

    def delay(self, path: str, seconds: float) -> None:
        """Hold each request to ``path`` (or under it, when it ends with "/") this long."""
        self._delays[path] = seconds

    def hold(self, path: str) -> None:
        """Hold each request to ``path`` unanswered until ``release(path)``."""
        self._gates[path] = asyncio.Event()

    def release(self, path: str) -> None:
        """Answer the requests held at ``path``, and those that come later at once."""
        self._gates[path].set()

    def _delay_for(self, path: str) -> float:
        if path in self._delays:
            return self._delays[path]
        return max((d for p, d in self._delays.items() if p.endswith("/") and path.startswith(p)), default=0)

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
        verified = None if self._secret is None else _verify(self._secret, body, headers)
        self.requests.append(Received(request.method, request.path, headers, body, time.time(), verified))
        async with self._arrived:
            self._arrived.notify_all()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        self.in_flight_at[request.path] += 1
        self.peak_at[request.path] = max(self.peak_at[request.path], self.in_flight_at[request.path])
        try:
            # a stall, not a wait: a slow receiver takes this long to answer (delay())
            await asyncio.sleep(self._delay_for(request.path))
            if request.path in self._gates:
                await self._gates[request.path].wait()
        finally:
            self.in_flight -= 1
            self.in_flight_at[request.path] -= 1
        if request.path in self._redirects:
            return web.Response(status=302, headers={"Location": self._redirects[request.path]})
        script = self._scripts.get(request.path)
        status = script.popleft() if script else 204
        if request.path in self._bodies and status != 204:
            return web.Response(
                status=status, body=self._bodies[request.path], content_type="application/octet-stream"
            )
        return web.Response(status=status, text=None if status == 204 else f"status {status}")


def _verify(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    """Verify as a receiver would: with the standardwebhooks library.

    The library decodes the body as UTF-8 before signing, so it cannot check a body
    that is not UTF-8; those are checked against the specification directly
    (HMAC-SHA256 over "{id}.{timestamp}.{body bytes}").
    """
    try:
        Webhook(secret).verify(body, headers, json_parse=False)
        return True
    except WebhookVerificationError:
        return False
    except UnicodeDecodeError:
        lowered = {k.lower(): v for k, v in headers.items()}
        key = base64.b64decode(secret.removeprefix("whsec_"))
        signed = f"{lowered['webhook-id']}.{lowered['webhook-timestamp']}.".encode() + body
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        return any(
            hmac.compare_digest(part, "v1," + expected) for part in lowered["webhook-signature"].split(" ")
        )


@asynccontextmanager
async def running_receiver(
    secret: str | None = None, tls: ssl.SSLContext | None = None
) -> AsyncIterator[Receiver]:
    """``tls``: serve https with this context (its certificate for 127.0.0.1)."""
    receiver = Receiver(secret)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", receiver._handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = runner.addresses[0][1]
    receiver.base_url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()
