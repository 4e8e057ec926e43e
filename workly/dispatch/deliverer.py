"""One HTTP attempt: the request exactly as enqueued, signed, through aiohttp.

Redirects are never followed and proxy variables are ignored (``trust_env=False``).
"""

from __future__ import annotations

import asyncio

import aiohttp

from workly import __version__
from workly.clock import Clock
from workly.dispatch.policy import DeliveryOutcome, parse_retry_after
from workly.models import ClaimedTask
from workly.signing import Signer

USER_AGENT = f"Workly/{__version__}"
_CHUNK = 16384
_NO_AUTO_HEADERS = ("Content-Type", "Accept", "Accept-Encoding")


def new_session(max_connections: int) -> aiohttp.ClientSession:
    """The process's one delivery session. Create it inside the running event loop."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=max_connections, limit_per_host=0, ttl_dns_cache=10),
        trust_env=False,
        auto_decompress=True,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


class Deliverer:
    def __init__(
        self, session: aiohttp.ClientSession, signer: Signer, clock: Clock, snippet_bytes: int = 2048
    ) -> None:
        self._session = session
        self._signer = signer
        self._clock = clock
        self._snippet_bytes = snippet_bytes

    async def deliver(self, task: ClaimedTask) -> DeliveryOutcome:
        started = self._clock()
        headers = {"user-agent": USER_AGENT, **task.headers}
        headers.update(self._signer.headers(task.id, int(started.timestamp()), task.body))
        try:
            async with self._session.request(
                task.method,
                task.url,
                data=task.body or None,
                headers=headers,
                # Send the request as enqueued: no Content-Type or Accept* headers the caller did not set.
                skip_auto_headers=_NO_AUTO_HEADERS,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=task.timeout),
            ) as response:
                snippet = await self._read_snippet(response)
                return DeliveryOutcome(
                    started_at=started,
                    finished_at=self._clock(),
                    status_code=response.status,
                    response=snippet,
                    retry_after=parse_retry_after(response.headers.get("retry-after"), self._clock()),
                )
        except TimeoutError:
            error = f"timeout: no complete response within {task.timeout:g}s"
        except aiohttp.ClientConnectorError as exc:
            error = f"connection failed: {exc.os_error or exc}"
        except aiohttp.ClientError as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # e.g. a URL aiohttp cannot encode: a failed attempt, never a lost task
            error = f"request failed: {type(exc).__name__}: {exc}"
        return DeliveryOutcome(started_at=started, finished_at=self._clock(), error=error)

    async def _read_snippet(self, response: aiohttp.ClientResponse) -> bytes:
        """The first bytes of the body; the rest is left unread (the connection is then closed)."""
        chunks: list[bytes] = []
        size = 0
        while size < self._snippet_bytes:
            chunk = await response.content.read(min(_CHUNK, self._snippet_bytes - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size >= self._snippet_bytes and not response.content.at_eof():
            response.close()
        return b"".join(chunks)


async def close_session(session: aiohttp.ClientSession) -> None:
    await session.close()
    await asyncio.sleep(0)
