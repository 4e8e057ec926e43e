"""Ctrl-C typed on a real (pseudo-)terminal, as a person stops `workly dev` or `workly serve`:
the terminal signals its whole foreground process group, supervisor and workers alike unless
they left it. The first Ctrl-C stops gracefully (deliveries in flight get their grace), a
second one stops at once, and one Ctrl-C is one stop, however many processes there are.
Everything waits on what can be seen: the log, the receiver, the processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST_RECOVERY_ENV, dev_args, drop_workly_env, serve_args
from tests.support.receiver import Receiver, running_receiver
from tests.support.servers import TEST_SECRET, api_client, free_port, wait_ready
from tests.support.terminal import Terminal, descendants, detached, on_a_terminal, wait_for_exit
from workly.config import Settings
from workly.service import Service

pytestmark = pytest.mark.e2e
GRACE = 30  # far longer than any test waits: a stop that ends early did not wait it out
WAITING = f"stopping: waiting up to {GRACE}s for"
COMMANDS = ["dev", "serve", pytest.param("serve --workers 2", marks=pytest.mark.postgres)]


@dataclass
class Command:
    kind: str  # "dev", "serve" or "serve --workers 2"
    args: list[str]
    env: dict[str, str]
    port: int
    database_url: str
    workers: int = 1


@pytest.fixture
def command(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Command:
    """`workly dev`, `workly serve` (one process, SQLite) or `workly serve --workers 2`
    (PostgreSQL), as the test's parameter names it."""
    kind: str = request.param
    port = free_port()
    env = {**FAST_RECOVERY_ENV, "WORKLY_SHUTDOWN_GRACE": str(GRACE)}
    database_url = f"sqlite:///{tmp_path / 'workly.db'}"
    if kind == "dev":
        args = dev_args(tmp_path / "workly.db", port)
    elif kind == "serve":
        env["WORKLY_DATABASE_URL"] = database_url
        args = [*serve_args(port), "--workers", "1"]
    else:
        # Resolved before the WORKLY_* variables go: pg_server may read WORKLY_TEST_DATABASE_URL.
        env["WORKLY_DATABASE_URL"] = database_url = request.getfixturevalue("pg_fresh_db")
        args = [*serve_args(port), "--workers", "2"]
    drop_workly_env(monkeypatch)
    return Command(kind, args, env, port, database_url, workers=2 if "--workers" in kind else 1)


def text(log: Path) -> str:
    return log.read_text(errors="replace")


async def wait_for_line(
    process: subprocess.Popen[bytes], log: Path, line: str, count: int = 1, timeout: float = 30
) -> None:
    """Until ``line`` is in the log ``count`` times, while ``process`` runs."""
    deadline = time.monotonic() + timeout
    while text(log).count(line) < count:
        if process.poll() is not None or time.monotonic() >= deadline:
            pytest.fail(f"not {count} {line!r} in the log (exit status {process.poll()}):\n{text(log)}")
        await asyncio.sleep(0.02)


async def serving(process: subprocess.Popen[bytes], port: int, log: Path, workers: int = 1) -> None:
    """Ready, every worker (wait_ready is content with the first): a worker still starting has
    yet to leave the terminal's process group."""
    await asyncio.to_thread(wait_ready, process, port, log)
    await wait_for_line(process, log, "Application startup complete", workers)


async def exit_status(terminal: Terminal, log: Path, timeout: float) -> int:
    try:
        return await asyncio.to_thread(terminal.process.wait, timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {timeout}s later:\n{text(log)}")


async def stored(database_url: str, task_ids: set[str]) -> dict[str, tuple[str, int]]:
    """Each task's status and attempts, as the stopped server left them: read by a service
    that dispatches nothing (a server started again would deliver what is left)."""
    settings = Settings(database_url=database_url, signing_secret=TEST_SECRET, dispatch=False)
    async with Service(settings).running() as service:
        tasks = [await service.tasks.get_task(task_id) for task_id in task_ids]
    return {task.id: (task.status, task.attempts) for task in tasks}


async def in_flight(receiver: Receiver, path: str, count: int, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while receiver.in_flight_at[path] < count:
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("command", COMMANDS, indirect=True)
async def test_a_second_ctrl_c_stops_at_once(command: Command, tmp_path: Path) -> None:
    """However soon after the first: a person who presses Ctrl-C twice wants out now."""
    args, env, port, log = command.args, command.env, command.port, tmp_path / "workly.log"
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.hold("/slow")  # answered only once the test is over
        try:
            with on_a_terminal(args, env, log) as terminal:
                await serving(terminal.process, port, log, command.workers)
                async with api_client(port) as client:
                    await client.put("/v1/queues/slow", json={"max_concurrency": 10, "timeout": 60})
                    tasks = [{"url": receiver.url("/slow")} for _ in range(4)]
                    response = await client.post("/v1/queues/slow/tasks/batch", json={"tasks": tasks})
                    assert response.status_code == 201, response.text
                await in_flight(receiver, "/slow", 4)
                processes = terminal.descendants()
                terminal.ctrl_c()
                await wait_for_line(terminal.process, log, WAITING)
                terminal.ctrl_c()
                stopping = time.monotonic()
                await exit_status(terminal, log, 10)
                took = time.monotonic() - stopping
                left = await asyncio.to_thread(wait_for_exit, processes, 10)
                assert left == [], f"processes {left} left running"
        finally:
            receiver.release("/slow")
    output = text(log)
    assert took < 5, f"took {took:.1f}s after the second Ctrl-C:\n{output}"
    assert "stopped without waiting for" in output, output  # it says what became of them


@pytest.mark.parametrize(
    "command", ["dev", pytest.param("serve --workers 2", marks=pytest.mark.postgres)], indirect=True
)
async def test_one_ctrl_c_under_a_burst_waits_for_the_long_delivery(command: Command, tmp_path: Path) -> None:
    """One Ctrl-C while a burst is being delivered and one long delivery is in flight: the
    server stops claiming, and does not end before the long delivery has been answered and
    recorded. Under --workers, however late the supervisor passes the Ctrl-C on: here it is
    stopped (SIGSTOP, a loaded machine's supervisor at its worst) until the workers, which
    must not have heard the terminal, have delivered the whole burst. A worker that heard it
    from the terminal as well would stop claiming at once, then take the supervisor's copy
    for a second Ctrl-C and abandon the long delivery."""
    args, env, port, log = command.args, command.env, command.port, tmp_path / "workly.log"
    supervised = command.kind != "dev"
    burst = 600
    async with running_receiver(TEST_SECRET) as receiver:
        # The burst's first deliveries are held until the Ctrl-C, so that it comes while they
        # are in flight however slowly this machine runs; the long one is held to the end.
        receiver.delay("/burst", 0.2)  # and the rest take a while: 600 over 100 or 200 slots
        receiver.hold("/burst")
        receiver.hold("/long")
        try:
            with on_a_terminal(args, env, log) as terminal:
                await serving(terminal.process, port, log, command.workers)
                async with api_client(port, timeout=30) as client:
                    await client.put("/v1/queues/q", json={"max_concurrency": 1000, "timeout": 60})
                    tasks = [{"url": receiver.url("/burst")} for _ in range(burst)]
                    tasks.insert(50, {"url": receiver.url("/long")})  # among the first in flight
                    for start in range(0, len(tasks), 200):
                        batch = {"tasks": tasks[start : start + 200]}
                        response = await client.post("/v1/queues/q/tasks/batch", json=batch)
                        assert response.status_code == 201, response.text
                    [long] = await receiver.wait_for("/long", 1, timeout=60)
                await in_flight(receiver, "/burst", 10)
                if supervised:
                    # The terminal's foreground process group is the supervisor's alone.
                    foreground = os.tcgetpgrp(terminal.controller)
                    workers = [pid for pid in terminal.descendants() if _is_worker(pid)]
                    assert len(workers) == 2, workers
                    heard = [pid for pid in workers if os.getpgid(pid) == foreground]
                    assert heard == [], f"workers {heard} are in the terminal's foreground process group"
                    terminal.process.send_signal(signal.SIGSTOP)
                terminal.ctrl_c()
                receiver.release("/burst")
                if supervised:
                    await receiver.wait_for("/burst", burst, timeout=60)  # nothing stopped them,
                    assert "Shutting down" not in text(log), text(log)  # nor began to
                    terminal.process.send_signal(signal.SIGCONT)  # the Ctrl-C is passed on now
                await wait_for_line(terminal.process, log, WAITING)
                # The burst's deliveries in flight end (none starts after the Ctrl-C); the held
                # one is all that is left, and the server waits for it.
                async with asyncio.timeout(20):
                    while receiver.in_flight_at["/burst"]:
                        await asyncio.sleep(0.02)
                assert terminal.process.poll() is None, text(log)
                receiver.release("/long")
                await exit_status(terminal, log, 20)
        finally:
            receiver.release("/burst")
            receiver.release("/long")
    long_id = long.headers["webhook-id"]
    output = text(log)
    assert "stopped without waiting" not in output, output
    assert await stored(command.database_url, {long_id}) == {long_id: ("succeeded", 1)}, output
    assert len(receiver.at("/long")) == 1


def _is_worker(pid: int) -> bool:
    """A process of multiprocessing's spawn (a worker), not its resource tracker."""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"spawn_main" in command_line


@pytest.mark.postgres
async def test_the_workers_stop_when_the_supervisor_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_fresh_db: str
) -> None:
    """kill -9 of the supervisor leaves no worker serving on its own: each notices, and stops
    as on SIGTERM (gracefully: its deliveries in flight get their grace)."""
    drop_workly_env(monkeypatch)
    port = free_port()
    env = {**FAST_RECOVERY_ENV, "WORKLY_DATABASE_URL": pg_fresh_db}
    log = tmp_path / "workly.log"
    # No terminal: the death of a terminal's controlling process hangs up its foreground group,
    # which would kill workers still in it, and a service manager or `nohup … &` has none.
    with detached([*serve_args(port), "--workers", "2"], env, log) as supervisor:
        await serving(supervisor, port, log, workers=2)
        workers = [pid for pid in descendants(supervisor.pid) if _is_worker(pid)]
        assert len(workers) == 2, workers
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait()
        left = await asyncio.to_thread(wait_for_exit, workers, 30)
        for pid in left:  # no longer the supervisor's: nothing else would end them
            os.kill(pid, signal.SIGKILL)
        assert left == [], f"workers {left} still running without their supervisor:\n{text(log)}"
    assert text(log).count("Application shutdown complete") == 2, text(log)


@pytest.mark.postgres
async def test_sigterm_to_every_process_of_the_service_is_one_graceful_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_fresh_db: str
) -> None:
    """systemd's stop (KillMode=control-group, its default) sends SIGTERM to every process of
    the service at once, and the supervisor passes its own on: a worker gets two. SIGTERM never
    cuts a stop short, so the deliveries in flight finish and are recorded, each sent once."""
    drop_workly_env(monkeypatch)
    port = free_port()
    env = {**FAST_RECOVERY_ENV, "WORKLY_DATABASE_URL": pg_fresh_db, "WORKLY_SHUTDOWN_GRACE": str(GRACE)}
    args, log = [*serve_args(port), "--workers", "2"], tmp_path / "workly.log"
    async with running_receiver(TEST_SECRET) as receiver:
        receiver.hold("/slow")
        try:
            with on_a_terminal(args, env, log) as terminal:
                await serving(terminal.process, port, log, workers=2)
                async with api_client(port) as client:
                    await client.put("/v1/queues/slow", json={"max_concurrency": 10, "timeout": 60})
                    tasks = [{"url": receiver.url("/slow")} for _ in range(6)]
                    response = await client.post("/v1/queues/slow/tasks/batch", json={"tasks": tasks})
                    ids = {task["id"] for task in response.json()["tasks"]}
                await in_flight(receiver, "/slow", 6)
                for pid in [terminal.process.pid, *terminal.descendants()]:
                    os.kill(pid, signal.SIGTERM)
                await wait_for_line(terminal.process, log, WAITING)
                receiver.release("/slow")
                await exit_status(terminal, log, 20)
        finally:
            receiver.release("/slow")
    assert "stopped without waiting" not in text(log), text(log)
    assert await stored(pg_fresh_db, ids) == dict.fromkeys(ids, ("succeeded", 1)), text(log)
    assert sorted(r.headers["webhook-id"] for r in receiver.at("/slow")) == sorted(ids)  # each once
