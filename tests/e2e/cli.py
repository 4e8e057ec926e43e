"""The `workly` command run in-process, for the tests of what it says (its arguments, output,
exit codes and messages), and a Workly app served in a thread of the test process for it to
talk to.

``run_cli`` calls the command through typer's CliRunner: the same app, option parsing and exit
codes as `python -m workly`, without starting a process. The client commands' requests go
through the transport it is given (workly/client/common.py's TRANSPORT): ``AppTransport``
hands those for the app's own address to the app, and sends any other (another --server) to
the network as the command would; ``NoServer`` records each request and answers none, for
input that must be refused before anything is sent. ``completed`` runs a server command
(`serve`, `dev`, `migrate`, `doctor`) that must refuse to start, told as subprocess.run tells it.

``served_in_thread`` runs the app and its service as `workly dev` with API tokens runs them
(SQLite, tokens required, loopback deliveries allowed), served by uvicorn on 127.0.0.1, port
0, in a thread with its own event loop: one server can outlive the tests' own loops, so a
module's tests can share it, and the tests' clients and the real CLI reach it on its port.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn
from typer.testing import CliRunner

from tests.support.servers import TEST_TOKEN
from workly.app import create_app
from workly.cli import app as cli_app
from workly.cli import checks
from workly.cli import server as server_commands
from workly.client.common import TRANSPORT
from workly.config import Settings
from workly.service import Service

if TYPE_CHECKING:
    from tests.e2e.conftest import E2E

ANSWER_SECONDS = 30  # the longest one request into the app may take (the command's own timeout)


@dataclass
class Run:
    """What one `workly` command did: its exit status, standard output and standard error."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(
    args: Sequence[str],
    env: Mapping[str, str],
    transport: httpx.BaseTransport | None = None,
    stdin: bytes = b"",
) -> Run:
    """`workly <args>` in this process with ``env`` as its only WORKLY_* variables (the others
    hidden, as a clean environment has them), a client command's requests sent through
    ``transport`` (None: the network). Blocks: a client command's test calls it from a thread
    (asyncio.to_thread) while its event loop goes on. An exception the command does not handle
    is raised here, where a process would print its traceback. The root logger, which the
    server commands set up for themselves, is put back as it was."""
    hidden: dict[str, str | None] = {name: None for name in os.environ if name.startswith("WORKLY_")}
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    token = TRANSPORT.set(transport)
    try:
        result = CliRunner().invoke(
            cli_app, list(args), input=stdin, env={**hidden, **env}, prog_name="workly", catch_exceptions=True
        )
    finally:
        TRANSPORT.reset(token)
        root.handlers[:] = handlers
        root.setLevel(level)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


def completed(args: Sequence[str], cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`workly <args>` in-process, run from ``cwd``, told as subprocess.run tells how a process
    went: for the tests of the server commands' refusals, written for `python -m workly`. A
    socket the command bound before it refused to start is closed at the end, as a process's
    are when it exits (`workly dev` binds its port before its last checks)."""
    bound: list[socket.socket] = []

    def listening_socket(host: str, port: int) -> socket.socket:
        bound.append(checks.listening_socket(host, port))
        return bound[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.setattr(server_commands, "listening_socket", listening_socket)
        try:
            run = run_cli(args, env)
        finally:
            for sock in bound:
                sock.close()
    return subprocess.CompletedProcess(["workly", *args], run.code, run.out, run.err)


async def workly(e2e: E2E, *args: str, env: dict[str, str] | None = None, stdin: bytes = b"") -> Run:
    """`workly <args>` in-process against the test's server (an ``InProcessServer``), as a user
    would type it: the server and token from WORKLY_SERVER / WORKLY_TOKEN unless ``env`` says
    otherwise."""
    assert isinstance(e2e.server, InProcessServer), "in-process commands need an in-process server"
    base = {"WORKLY_SERVER": e2e.server.base_url, "WORKLY_TOKEN": TEST_TOKEN}
    transport = e2e.server.transport()
    return await asyncio.to_thread(run_cli, args, {**base, **(env or {})}, transport, stdin)


async def real_workly(e2e: E2E, *args: str, env: dict[str, str] | None = None) -> Run:
    """`python -m workly <args>`, the real entry point in its own process, against the test's
    server over its socket, with the server and token from WORKLY_SERVER / WORKLY_TOKEN."""
    base = {"WORKLY_SERVER": e2e.server.base_url, "WORKLY_TOKEN": TEST_TOKEN, "PATH": "/usr/bin:/bin"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "workly", *args,
        env={**base, **(env or {})}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


def offline(*args: str) -> tuple[Run, list[httpx.Request]]:
    """`workly <args>` in-process with no server at all, and the requests it tried to send."""
    transport = NoServer()
    run = run_cli(args, {"WORKLY_SERVER": "http://127.0.0.1:9", "WORKLY_TOKEN": TEST_TOKEN}, transport)
    return run, transport.requests


class NoServer(httpx.BaseTransport):
    """Records every request and answers none (as if nothing listened): for input the command
    must refuse before it sends anything, ``requests`` should stay empty."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        raise httpx.ConnectError("no server in this test", request=request)


class AppTransport(httpx.BaseTransport):
    """Requests for ``origin`` go to ``app``, on ``loop`` (another thread's, where its service
    runs), through httpx's ASGI transport; any other goes to the network. The command's client
    closes it when the command ends."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop, origin: str) -> None:
        self._asgi = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
        self._loop = loop
        self._origin = httpx.URL(origin)
        self._network = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if (url.scheme, url.host, url.port) != (self._origin.scheme, self._origin.host, self._origin.port):
            return self._network.handle_request(request)
        content = request.read()
        answered = asyncio.run_coroutine_threadsafe(self._ask(request, content), self._loop)
        status, headers, body = answered.result(timeout=ANSWER_SECONDS)
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body), request=request)

    async def _ask(self, request: httpx.Request, content: bytes) -> tuple[int, httpx.Headers, bytes]:
        forwarded = httpx.Request(request.method, request.url, headers=request.headers, content=content)
        response = await self._asgi.handle_async_request(forwarded)
        body = await response.aread()
        return response.status_code, response.headers, body

    def close(self) -> None:
        self._network.close()


@dataclass
class InProcessServer:
    """A Workly served in a thread of this process (``served_in_thread``) at ``base_url``, a
    real socket; ``transport()`` is how an in-process command reaches its app."""

    base_url: str
    app: Any
    loop: asyncio.AbstractEventLoop
    command: str = "dev"

    def transport(self) -> AppTransport:
        return AppTransport(self.app, self.loop, self.base_url)


Started = tuple[Any, asyncio.AbstractEventLoop, uvicorn.Server, str]  # the app, where it runs, its URL


@contextmanager
def served_in_thread(settings: Settings) -> Iterator[InProcessServer]:
    """The app and its service, started, served on 127.0.0.1 at a port the system chose; stopped
    (its service's stop included) at the end."""
    started: Future[Started] = Future()
    thread = threading.Thread(
        target=asyncio.run, args=(_serve(settings, started),), name="workly-app", daemon=True
    )
    thread.start()
    try:
        app, loop, server, base_url = started.result(timeout=60)
    except BaseException:
        thread.join(timeout=60)
        raise
    try:
        yield InProcessServer(base_url, app, loop)
    finally:
        loop.call_soon_threadsafe(setattr, server, "should_exit", True)
        thread.join(timeout=60)
        assert not thread.is_alive(), "the in-process server did not stop in 60 s"


async def _serve(settings: Settings, started: Future[Started]) -> None:
    app = create_app(Service(settings))
    config = uvicorn.Config(app, lifespan="on", log_config=None, access_log=False, log_level="warning")
    server = uvicorn.Server(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                break
            await asyncio.sleep(0.01)
        if server.started:
            port = sock.getsockname()[1]
            started.set_result((app, asyncio.get_running_loop(), server, f"http://127.0.0.1:{port}"))
        await serving
    except BaseException as exc:
        if not started.done():
            started.set_exception(exc)
        raise
    finally:
        sock.close()
    if not started.done():
        started.set_exception(RuntimeError("uvicorn stopped before it started"))
