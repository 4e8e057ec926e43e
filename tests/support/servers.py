"""Running Workly for tests: in-process (through httpx's ASGI transport, or over a real
socket with uvicorn), or as the real CLI. Every in-process app serves a Service built as
production builds it (workly/service, workly/app.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tools.ports import free_port as free_port
from workly.app import create_app
from workly.clock import Clock
from workly.config import Settings
from workly.service import Service

TEST_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TEST_TOKEN = "test-token-0123456789abcdef-0123456789"
AUTH = {"authorization": f"Bearer {TEST_TOKEN}"}
# What every test server gets: an API token, and loopback opened for deliveries (the
# receivers listen on 127.0.0.1; `workly serve` refuses non-public addresses by default).
TEST_SERVER_ENV = {"WORKLY_API_TOKENS": TEST_TOKEN, "WORKLY_OUTBOUND_ALLOW": "127.0.0.0/8 ::1/128"}


def api_client(base_url: str | int, timeout: float = 5.0) -> httpx.AsyncClient:
    """An API client carrying the test token; an int is a port on 127.0.0.1."""
    url = f"http://127.0.0.1:{base_url}" if isinstance(base_url, int) else base_url
    return httpx.AsyncClient(base_url=url, headers=AUTH, timeout=timeout)


@asynccontextmanager
async def in_process(
    settings: Settings, clock: Clock | None = None, **client_options: Any
) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    """The service, started, and a client that calls its app directly (no socket, no
    uvicorn): for tests of what the API answers rather than of how bytes travel."""
    service = Service(settings, clock)
    app = create_app(service, anonymous=True)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    async with (
        service.running(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7337", **client_options) as client,
    ):
        yield service, client


@asynccontextmanager
async def running_app(settings: Settings, clock: Clock | None = None) -> AsyncIterator[str]:
    """Serve the app with uvicorn on 127.0.0.1 in this event loop; yield its base URL."""
    config = uvicorn.Config(
        create_app(Service(settings, clock), anonymous=True),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[_bound_socket()]))
    try:
        while not server.started:
            if serving.done():
                serving.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


def _bound_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def workly_process(
    args: list[str], env: dict[str, str], port: int, log: Path, program: list[str] | None = None
) -> Iterator[str]:
    """Start ``python -m workly <args>`` (or ``program <args>``), wait for /health/ready, stop it
    by PID at the end."""
    with workly_subprocess(args, env, port, log, program) as process:
        _wait_ready(process, f"http://127.0.0.1:{port}", log)
        yield f"http://127.0.0.1:{port}"


@contextmanager
def workly_subprocess(
    args: list[str], env: dict[str, str], port: int, log: Path, program: list[str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``python -m workly <args>`` (or ``program <args>``: another install's `workly`), not
    waiting for it; stop it by PID at the end."""
    full_env = {**os.environ, **env}
    command = program or [sys.executable, "-m", "workly"]
    with log.open("ab") as out:
        process = subprocess.Popen([*command, *args], env=full_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_ready(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    _wait_ready(process, f"http://127.0.0.1:{port}", log)


def _wait_ready(process: subprocess.Popen[bytes], base_url: str, log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"workly exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(base_url + "/health/ready", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"workly did not become ready in {timeout}s:\n{log.read_text(errors='replace')}")
