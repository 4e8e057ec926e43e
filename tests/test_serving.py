"""The server the CLI runs (workly/cli/serving.py), in this process: what it does with a stop
asked for before the app has started. The signals themselves, on real processes and a real
terminal: tests/e2e/test_ctrl_c.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import uvicorn

from tests.support.servers import TEST_SECRET
from workly.app import create_app
from workly.cli.serving import WorklyServer
from workly.config import Settings
from workly.errors import ServiceNotRunning
from workly.service import Service


async def test_a_stop_asked_for_before_the_app_starts_starts_nothing(tmp_path: Path) -> None:
    """A worker booting while a Ctrl-C is pressed handles it once its server's handlers are in
    place, before the app starts: it then starts nothing (no database opened, no task claimed
    that a second Ctrl-C would abandon) and ends."""
    database = tmp_path / "workly.db"
    service = Service(Settings(database_url=f"sqlite:///{database}", signing_secret=TEST_SECRET))
    server = WorklyServer(uvicorn.Config(create_app(service, anonymous=True), log_level="warning"), service)
    server.should_exit = True  # what the first signal's handler leaves
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        await server.serve(sockets=[sock])
    assert not server.started
    assert not database.exists()
    with pytest.raises(ServiceNotRunning):
        await service.queues.list_queues()
