"""Free loopback ports for the servers the tests and the tools start."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
from collections.abc import Iterator
from pathlib import Path

# A port for a server started later, which binds it then: one the kernel handed out
# for port 0 could be handed out again in between (to another test's client or server: "Address
# already in use" under four test processes). So each test process takes its ports from a block
# of its own outside the kernel's ephemeral range, where neither bind(0) nor an outgoing
# connection ever lands, starting at a random place in it (another test session may run at the
# same time) and checking that each one is free.
_BLOCK = 1000  # ports, at most
_LOWEST = 1024  # below: ports only root may bind


def _ephemeral_range() -> tuple[int, int]:
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[:2]
        return int(low), int(high)
    return 32768, 60999


def _block() -> range:
    """This process's block: the widest gap outside the ephemeral range, shared evenly among
    the session's test processes (``PYTEST_XDIST_WORKER_COUNT``; one outside pytest-xdist),
    the first process's block nearest the ephemeral range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or "1"))
    index = int(worker) % count if worker.isdigit() else 0
    low, high = _ephemeral_range()
    below, above = (_LOWEST, low), (high + 1, 65536)
    start, end = max(below, above, key=lambda gap: gap[1] - gap[0])
    size = min(_BLOCK, (end - start) // count)
    if size < 1:
        raise RuntimeError(f"no room for {count} blocks of ports outside the ephemeral range {low}-{high}")
    if (start, end) == below:
        return range(end - (index + 1) * size, end - index * size)
    return range(start + index * size, start + (index + 1) * size)


def _ports() -> Iterator[int]:
    block = _block()
    offset = int.from_bytes(os.urandom(2)) % len(block)
    while True:
        offset = (offset + 1) % len(block)
        yield block[offset]


_next_ports: Iterator[int] | None = None


def free_port() -> int:
    """A loopback port nothing listens on or was just connected from, in this process's block
    (a test process's, inherited by the tools it runs; see above)."""
    global _next_ports
    if _next_ports is None:
        _next_ports = _ports()
    for port in itertools.islice(_next_ports, _BLOCK):  # each port of a block at most once
        with socket.socket() as sock:  # no SO_REUSEADDR: a port in TIME_WAIT is refused too
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in this process's block ({_block()})")
