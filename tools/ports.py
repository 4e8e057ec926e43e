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
# of its own below the kernel's ephemeral range, where neither bind(0) nor an outgoing
# connection ever lands, starting at a random place in it (another test session may run at the
# same time) and checking that each one is free.
_BLOCK = 1000
_BLOCKS = 12


def _ephemeral_low() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return 32768


def _ports() -> Iterator[int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % _BLOCKS if worker.isdigit() else 0
    low = _ephemeral_low() - (index + 1) * _BLOCK
    offset = int.from_bytes(os.urandom(2)) % _BLOCK
    while True:
        offset = (offset + 1) % _BLOCK
        yield low + offset


_next_ports: Iterator[int] | None = None


def free_port() -> int:
    """A loopback port nothing listens on or was just connected from, in this process's block
    (a test process's, inherited by the tools it runs; see above)."""
    global _next_ports
    if _next_ports is None:
        _next_ports = _ports()
    for port in itertools.islice(_next_ports, _BLOCK):
        with socket.socket() as sock:  # no SO_REUSEADDR: a port in TIME_WAIT is refused too
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in this test process's block of {_BLOCK}")
