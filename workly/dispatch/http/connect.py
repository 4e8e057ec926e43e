"""Making a TCP connection: Happy Eyeballs over checked addresses, and a proxy's tunnel.

Happy Eyeballs (RFC 8305): the addresses are tried in turn, IPv6 and IPv4 interleaved,
and the next attempt starts as soon as the previous one fails or after ``delay`` (250 ms)
without an answer, with the earlier attempts still running; the first to connect wins
and the others are closed. So an address that hangs (a broken IPv6 path, a dead A
record) costs a quarter of a second instead of the whole connect budget.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from itertools import chain, zip_longest

from workly.dispatch.http.errors import ConnectError, ProxyRefused

HAPPY_EYEBALLS_DELAY = 0.25  # RFC 8305's recommended Connection Attempt Delay
MAX_PROXY_ANSWER = 16 * 1024


def interleave(addresses: Sequence[str]) -> list[str]:
    """The addresses in the order to try them: families alternating, the first one's first
    (RFC 8305, section 4), each family in the resolver's order."""
    first_v6 = [a for a in addresses if ":" in a]
    v4 = [a for a in addresses if ":" not in a]
    if not addresses or not first_v6 or not v4:
        return list(addresses)
    ordered = (first_v6, v4) if ":" in addresses[0] else (v4, first_v6)
    return [a for a in chain.from_iterable(zip_longest(*ordered)) if a is not None]


async def connect_first(
    addresses: Sequence[str], port: int, delay: float = HAPPY_EYEBALLS_DELAY
) -> socket.socket:
    """A connected, non-blocking socket to the first of ``addresses`` that answers."""
    loop = asyncio.get_running_loop()
    waiting = iter(interleave(addresses))
    running: set[asyncio.Task[socket.socket]] = set()
    failures: list[str] = []
    try:
        while True:
            address = next(waiting, None)
            if address is not None:
                running.add(loop.create_task(_connect_one(address, port)))
            if not running:
                raise ConnectError("; ".join(failures) or "no address to connect to")
            done, _ = await asyncio.wait(
                running, timeout=delay if address is not None else None, return_when=asyncio.FIRST_COMPLETED
            )
            for attempt in done:
                running.discard(attempt)
                error = attempt.exception()
                if error is None:
                    return attempt.result()
                failures.append(str(error))
            # An attempt failed (start the next now) or the delay passed (start it too).
    finally:
        # Not awaited: a cancel of this call that lands meanwhile must not be swallowed.
        for attempt in running:
            attempt.cancel()
            attempt.add_done_callback(_close_unused)


def _close_unused(attempt: asyncio.Task[socket.socket]) -> None:
    """An attempt that lost the race: close its socket if it connected after all (one
    cancelled in time closed its own), and take its error so none goes unretrieved."""
    if not attempt.cancelled() and attempt.exception() is None:
        attempt.result().close()


async def _connect_one(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.get_running_loop().sock_connect(sock, _sockaddr(address, port))
    except BaseException as exc:
        sock.close()
        if isinstance(exc, OSError):
            raise ConnectError(f"{address}: {exc.strerror or exc}") from None
        raise
    return sock


def _sockaddr(address: str, port: int) -> tuple[str, int] | tuple[str, int, int, int]:
    if ":" not in address:
        return (address, port)
    text, _, zone = address.partition("%")
    scope = 0
    if zone:
        scope = int(zone) if zone.isdigit() else socket.if_nametoindex(zone)
    return (str(ipaddress.IPv6Address(text)), port, 0, scope)


async def open_tunnel(sock: socket.socket, authority: str, proxy_authorization: str | None) -> None:
    """Ask the proxy on ``sock`` for a tunnel to ``authority`` (host:port) with CONNECT and
    read its answer, byte for byte up to the blank line, so nothing of the tunnel's own
    bytes is taken. A refusal says what the proxy answered."""
    loop = asyncio.get_running_loop()
    lines = [f"CONNECT {authority} HTTP/1.1", f"host: {authority}"]
    if proxy_authorization is not None:
        lines.append(f"proxy-authorization: {proxy_authorization}")
    await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    answer = bytearray()
    while not answer.endswith((b"\n\n", b"\n\r\n")):  # the blank line, after CRLF or bare LF lines
        if len(answer) >= MAX_PROXY_ANSWER:
            raise ProxyRefused("the proxy's answer to CONNECT is too long")
        byte = await loop.sock_recv(sock, 1)
        if not byte:
            raise ProxyRefused("the proxy closed the connection instead of opening the tunnel")
        answer += byte
    status_line = answer.split(b"\n", 1)[0].decode("latin-1").strip()
    parts = status_line.split(" ", 2)
    if (
        len(parts) < 2
        or not parts[0].startswith("HTTP/1.")
        or not (parts[1].isascii() and parts[1].isdigit())
    ):
        raise ProxyRefused(f"the proxy did not answer CONNECT in HTTP: {status_line[:100]!r}")
    if not 200 <= int(parts[1]) < 300:
        raise ProxyRefused(f"the proxy refused the tunnel to {authority}: {status_line[:200]}")
