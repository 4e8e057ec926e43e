"""tools/ports.py: each test process's block of ports lies outside the kernel's ephemeral
range, above the ports only root may bind, apart from every other process's block."""

from __future__ import annotations

import pytest

from tools import ports


def blocks(monkeypatch: pytest.MonkeyPatch, ephemeral: tuple[int, int], count: int) -> list[range]:
    monkeypatch.setattr(ports, "_ephemeral_range", lambda: ephemeral)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))
    found = []
    for index in range(count):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        found.append(ports._block())
    return found


@pytest.mark.parametrize(
    ("ephemeral", "count"),
    [
        ((32768, 60999), 4),
        ((32768, 60999), 40),
        ((1024, 60999), 4),
        ((10000, 65535), 14),
        ((40000, 50000), 64),
    ],
)
def test_blocks_are_apart_and_outside_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch, ephemeral: tuple[int, int], count: int
) -> None:
    found = blocks(monkeypatch, ephemeral, count)
    every = [port for block in found for port in block]
    assert len(every) == len(set(every))  # no port in two blocks
    assert all(1024 <= port <= 65535 and not ephemeral[0] <= port <= ephemeral[1] for port in every)
    assert min(len(block) for block in found) >= 1


def test_no_room_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="no room for 4 blocks"):
        blocks(monkeypatch, (1024, 65535), 4)


def test_a_port_is_free_and_in_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_next_ports", None)
    port = ports.free_port()
    assert port in ports._block()
