"""Fixtures for the end-to-end tests: the real ``workly`` CLI as a subprocess, a receiver, a client.

``workly_server`` is parametrised over the two ways Workly runs: ``workly dev`` (SQLite in
tmp_path) and ``workly serve`` (a fresh PostgreSQL database), so every test that uses it
checks both. Deliveries only ever go to the local receiver on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.browser import CHROMIUM, headless_tab
from tests.e2e.cli import InProcessServer, served_in_thread
from tests.support.receiver import Receiver, running_receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process
from workly.config import Settings

POLL_INTERVAL = "0.2"
TERMINAL = frozenset({"succeeded", "failed", "canceled"})


# Servers in the fault-injection tests: short polls and leases, so that what a crash or a
# stop leaves behind comes back within seconds.
FAST_RECOVERY_ENV = {
    "WORKLY_SIGNING_SECRET": TEST_SECRET,
    **TEST_SERVER_ENV,
    "WORKLY_POLL_INTERVAL": "0.2",
    "WORKLY_LEASE_MARGIN": "3",
    "WORKLY_DB_TIMEOUT": "1",  # the shortest statement bound a 3 s margin allows
    "WORKLY_REAP_INTERVAL": "0.2",
}


def clean_env(**env: str) -> dict[str, str]:
    """This process's environment without any WORKLY_* variable, plus ``env``."""
    base = {name: value for name, value in os.environ.items() if not name.startswith("WORKLY_")}
    return {**base, **env}


def drop_workly_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """``workly_process`` merges os.environ into the child's: keep the parent's WORKLY_* out."""
    for name in list(os.environ):
        if name.startswith("WORKLY_"):
            monkeypatch.delenv(name)


@dataclass
class WorklyServer:
    command: str  # "dev" or "serve"
    base_url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def dev_args(db: Path, port: int) -> list[str]:
    return ["dev", "--db", str(db), "--port", str(port)]


def serve_args(port: int) -> list[str]:
    return ["serve", "--host", "127.0.0.1", "--port", str(port)]


@pytest.fixture(params=["dev", pytest.param("serve", marks=pytest.mark.postgres)])
def workly_server(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WorklyServer]:
    """The real CLI: ``workly dev`` on SQLite, or ``workly serve`` on a fresh Postgres database."""
    command: str = request.param
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV, "WORKLY_POLL_INTERVAL": POLL_INTERVAL}
    port = free_port()
    if command == "dev":
        args = dev_args(tmp_path / "workly.db", port)
    else:
        # Resolved before the WORKLY_* variables go: pg_server may read WORKLY_TEST_DATABASE_URL.
        env["WORKLY_DATABASE_URL"] = request.getfixturevalue("pg_fresh_db")
        args = serve_args(port)
    drop_workly_env(monkeypatch)
    log = tmp_path / f"workly-{command}.log"
    with workly_process(args, env, port, log) as base_url:
        yield WorklyServer(command, base_url, log)


@pytest.fixture
def dev_server_with_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WorklyServer]:
    """`workly dev` with WORKLY_API_TOKENS set: for tests of what only speaks the API (the client
    commands, the dashboard), where one backend is enough and the token checks should run."""
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV, "WORKLY_POLL_INTERVAL": POLL_INTERVAL}
    port = free_port()
    drop_workly_env(monkeypatch)
    log = tmp_path / "workly-dev.log"
    with workly_process(dev_args(tmp_path / "workly.db", port), env, port, log) as base_url:
        yield WorklyServer("dev", base_url, log)


def dev_settings(folder: Path, **overrides: Any) -> Settings:
    """What ``dev_server_with_tokens`` runs with (`workly dev --db FOLDER/workly.db` with API
    tokens, loopback deliveries allowed, a short poll); the parent's WORKLY_* count for nothing."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("WORKLY_")]:
            patch.delenv(name)
        return Settings(
            database_url=f"sqlite:///{folder / 'workly.db'}",
            signing_secret=TEST_SECRET,
            api_tokens=TEST_SERVER_ENV["WORKLY_API_TOKENS"],
            outbound_allow=TEST_SERVER_ENV["WORKLY_OUTBOUND_ALLOW"],
            poll_interval=float(POLL_INTERVAL),
            **overrides,
        )


@pytest.fixture(scope="module")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """``dev_server_with_tokens``'s server in this process (tests/e2e/cli.py), one for a whole
    module: for the tests of the client commands, run in-process, each in queues (or other
    names) of its own. Its port is the one the system chose."""
    with served_in_thread(dev_settings(tmp_path_factory.mktemp("workly"))) as server:
        yield server


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver(TEST_SECRET) as running:
        yield running


@dataclass
class E2E:
    server: WorklyServer | InProcessServer
    receiver: Receiver
    client: httpx.AsyncClient


@pytest.fixture
async def e2e(workly_server: WorklyServer, receiver: Receiver) -> AsyncIterator[E2E]:
    """A running server, a receiver and an API client. The receiver stops before the server does,
    so deliveries still in flight at teardown fail fast instead of stalling the shutdown."""
    async with api_client(workly_server.base_url, timeout=10) as client:
        yield E2E(workly_server, receiver, client)


@asynccontextmanager
async def own_e2e(folder: Path, **overrides: Any) -> AsyncIterator[E2E]:
    """As ``e2e``, with an in-process server of its own (``dev_settings`` with ``overrides``),
    for a test about all that a server holds. The receiver stops before the server does."""
    with served_in_thread(dev_settings(folder, **overrides)) as server:
        async with (
            running_receiver(TEST_SECRET) as receiver,
            api_client(server.base_url, timeout=10) as client,
        ):
            yield E2E(server, receiver, client)


@pytest.fixture
async def fresh_e2e(tmp_path: Path) -> AsyncIterator[E2E]:
    """``own_e2e``: a server that holds only what the test puts there."""
    async with own_e2e(tmp_path) as made:
        yield made


async def enqueue(client: httpx.AsyncClient, queue: str, task: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(f"/v1/queues/{queue}/tasks", json=task)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def put_queue(client: httpx.AsyncClient, queue: str, **config: Any) -> dict[str, Any]:
    response = await client.put(f"/v1/queues/{queue}", json=config)
    assert response.status_code in (200, 201), response.text
    stored: dict[str, Any] = response.json()
    return stored


async def get_task(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/tasks/{task_id}")
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task


async def get_attempts(client: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/tasks/{task_id}/attempts")
    assert response.status_code == 200, response.text
    attempts: list[dict[str, Any]] = response.json()["attempts"]
    return attempts


async def wait_for_status(
    client: httpx.AsyncClient, task_id: str, status: str, timeout: float = 15.0
) -> dict[str, Any]:
    """Poll the task until it has ``status``; fail at once if it ends in another terminal status."""
    deadline = time.monotonic() + timeout
    while True:
        task = await get_task(client, task_id)
        if task["status"] == status:
            return task
        if task["status"] in TERMINAL:
            pytest.fail(f"task {task_id} ended {task['status']!r}, expected {status!r}: {task}")
        if time.monotonic() >= deadline:
            pytest.fail(f"task {task_id} not {status!r} after {timeout}s: {task}")
        await asyncio.sleep(0.05)


@pytest.fixture
def chromium() -> str:
    """Debian's Chromium, for the dashboard tests; in CI its absence fails them (.ci/run
    installs it)."""
    pytest.importorskip("playwright.async_api")
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium package")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture
async def page(chromium: str) -> AsyncIterator[tuple[Any, list[str]]]:
    """A headless tab on 127.0.0.1 only (tests/e2e/browser.py), and the dialogs it saw."""
    async with headless_tab(chromium) as opened:
        yield opened


async def create_endpoint(client: httpx.AsyncClient, url: str, **fields: Any) -> dict[str, Any]:
    response = await client.post("/v1/endpoints", json={"url": url, **fields})
    assert response.status_code == 201, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint
