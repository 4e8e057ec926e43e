"""Bulk operations from the CLI (`workly retry` / `workly cancel` with filter options,
`workly operations`, `workly operation`), run in-process (tests/e2e/cli.py) against `workly
dev`'s app with API tokens required, one server for the module, each test in queues of its
own (a test about every operation the server holds has a server of its own). Usage errors are
run with no server at all. What a terminal shows, and Ctrl-C, are the real `python -m workly`
on a pseudo-terminal.

Following an operation to its end needs the server's runner, which runs where dispatching
does; the tests of --no-wait and of Ctrl-C use a server with WORKLY_DISPATCH=false instead,
where an operation stays running for as long as the test looks at it.
"""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.cli import InProcessServer, Run, offline, workly
from tests.e2e.conftest import (
    E2E,
    enqueue,
    get_attempts,
    get_task,
    own_e2e,
    wait_for_status,
)
from tests.support.servers import TEST_TOKEN

pytestmark = pytest.mark.e2e
SUMMARY = re.compile(r"(op_\w+) (\w+): (\d+) matched, (\d+) changed, (\d+) skipped")


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


@pytest.fixture
async def held(tmp_path: Path) -> AsyncIterator[E2E]:
    """A server of the test's own that does not dispatch: it stores operations but never works them."""
    async with own_e2e(tmp_path, dispatch=False) as made:
        yield made


def ok(run: Run) -> Run:
    assert run.code == 0 and not run.err, run
    return run


def summary(run: Run) -> tuple[str, str, int, int, int]:
    """The operation id, its state and its counts, from the one line a finished operation prints."""
    assert "\r" not in run.out, run  # not a terminal: no progress line
    match = SUMMARY.fullmatch(run.out.strip())
    assert match is not None, run
    op_id, state, matched, changed, skipped = match.groups()
    return op_id, state, int(matched), int(changed), int(skipped)


async def operations(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/v1/operations")
    assert response.status_code == 200, response.text
    listed: list[dict[str, Any]] = response.json()["operations"]
    return listed


async def get_operation(client: httpx.AsyncClient, op_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/operations/{op_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def delayed(e2e: E2E, queue: str, count: int) -> list[str]:
    """``count`` tasks in ``queue`` due in an hour: ready, and nothing delivers them meanwhile."""
    url = e2e.receiver.url("/later")
    return [(await enqueue(e2e.client, queue, {"url": url, "delay": 3600}))["id"] for _ in range(count)]


async def test_retry_by_filter_redrives_the_failed_tasks_it_matches(e2e: E2E) -> None:
    e2e.receiver.script("/flaky", [500] * 4)  # then 204
    failing = {"url": e2e.receiver.url("/flaky"), "max_attempts": 1}
    ids = [(await enqueue(e2e.client, "redrive", failing))["id"] for _ in range(3)]
    elsewhere = (await enqueue(e2e.client, "elsewhere", failing))["id"]
    for task_id in [*ids, elsewhere]:
        assert (await wait_for_status(e2e.client, task_id, "failed"))["attempts"] == 1

    run = ok(await workly(e2e, "retry", "--queue", "redrive", "--status", "failed"))
    op_id, *counts = summary(run)
    assert counts == ["succeeded", 3, 3, 0]
    stored = await get_operation(e2e.client, op_id)
    assert (stored["action"], stored["filter"]) == ("retry", {"queue": "redrive", "status": "failed"})
    for task_id in ids:  # each delivered again: attempt 2, which the receiver answers 204
        assert (await wait_for_status(e2e.client, task_id, "succeeded"))["attempts"] == 2
        assert [a["status_code"] for a in await get_attempts(e2e.client, task_id)] == [500, 204]
    assert (await get_task(e2e.client, elsewhere))["attempts"] == 1  # another queue: not matched

    again = ok(await workly(e2e, "retry", "--queue", "redrive", "--json"))
    done = again.json()  # all succeeded now: matched, and skipped
    assert (done["state"], done["matched"], done["changed"], done["skipped"]) == ("succeeded", 3, 0, 3)


async def test_cancel_by_filter_cancels_the_ready_tasks_it_matches(fresh_e2e: E2E) -> None:
    e2e = fresh_e2e  # every operation on the server is listed: only this test's may be there
    ids = await delayed(e2e, "later", 3)
    [other] = await delayed(e2e, "other", 1)
    run = ok(await workly(e2e, "cancel", "--queue", "later", "--status", "ready"))
    assert summary(run)[1:] == ("succeeded", 3, 3, 0)
    assert [(await get_task(e2e.client, task_id))["status"] for task_id in ids] == ["canceled"] * 3
    assert (await get_task(e2e.client, other))["status"] == "ready"

    listed = ok(await workly(e2e, "operations"))
    [row] = [line.split() for line in listed.out.splitlines()[1:]]
    assert row[:6] == [summary(run)[0], "cancel", "succeeded", "3", "3", "0"]
    assert row[-2:] == ["queue=later", "status=ready"]


async def test_a_ready_task_retried_by_id_is_made_due_now(e2e: E2E) -> None:
    [task_id] = await delayed(e2e, "soon", 1)
    run = ok(await workly(e2e, "retry", task_id))
    assert run.out.strip() == f"{task_id} ready again (queue soon, status ready)"
    await e2e.receiver.wait_for("/later", 1)  # delivered now, not in an hour
    await wait_for_status(e2e.client, task_id, "succeeded")


async def test_since_and_until_select_by_when_tasks_were_created(e2e: E2E) -> None:
    await delayed(e2e, "dated", 2)
    before = datetime.now(UTC).timestamp()
    created = ok(
        await workly(e2e, "cancel", "--queue", "dated", "--since", "1h", "--no-wait", "--json")
    ).json()
    after = datetime.now(UTC).timestamp()
    since = datetime.fromisoformat(created["filter"]["created_after"]).timestamp()
    assert before - 3600 - 1 <= since <= after - 3600 + 1  # an hour back from when the command ran
    await wait_for_operation(e2e.client, created["id"])
    assert (await get_operation(e2e.client, created["id"]))["changed"] == 2
    older = await workly(e2e, "retry", "--queue", "dated", "--until", "1h")
    assert summary(ok(older))[1:] == ("succeeded", 0, 0, 0)  # nothing is an hour old yet
    future = await workly(e2e, "retry", "--queue", "dated", "--since", "2999-01-01T00:00:00+01:00")
    assert summary(ok(future))[2] == 0


async def test_usage_errors_exit_2_and_create_no_operation(e2e: E2E) -> None:
    [task_id] = await delayed(e2e, "q", 1)
    for args, says in [
        (["retry"], "give a TASK_ID, or filter options"),
        (["cancel", "--no-wait"], "give a TASK_ID, or filter options"),
        (["retry", task_id, "--queue", "q"], "give a TASK_ID or filter options, not both"),
        (["cancel", task_id, "--status", "ready"], "give a TASK_ID or filter options, not both"),
        (["retry", "--since", "yesterday"], "--since: 'yesterday' is neither a time"),
        (["cancel", "--until", "2030-01-01T00:00:00"], "--until: '2030-01-01T00:00:00' has no UTC offset"),
        (["retry", "--since", "1h", "--until", "2h"], "is not before --until"),
        (["retry", "--status", "done"], "--status 'done' is not one of"),
        (["retry", "--last-status-code", "600"], "--last-status-code 600 is not an HTTP status"),
        (["cancel", "--queue", "bad/q"], "--queue 'bad/q' is not a queue name"),
    ]:
        run, sent = offline(*args)
        assert (run.code, run.out, sent) == (2, "", []), run  # nothing sent: no operation made
        assert says in run.err and "Traceback" not in run.err, run
    assert (await get_task(e2e.client, task_id))["status"] == "ready"


async def test_the_progress_line_is_drawn_on_a_terminal_then_replaced_by_the_summary(e2e: E2E) -> None:
    await delayed(e2e, "watched", 3)
    code, out, err = await asyncio.to_thread(
        on_terminal, e2e.server.base_url, ["cancel", "--queue", "watched"]
    )
    assert (code, err) == (0, b""), (out, err)
    progress, _, last = out.rpartition(b"\r\x1b[K")  # the line erased, the summary in its place
    assert progress.startswith(b"\r[") and b"/3  changed " in progress
    assert SUMMARY.fullmatch(last.decode().strip()) is not None, out


async def test_no_wait_returns_at_once_and_the_operation_shows_its_progress(held: E2E) -> None:
    await delayed(held, "held", 2)
    run = ok(await workly(held, "cancel", "--queue", "held", "--no-wait"))
    first, second = run.out.splitlines()
    op_id = first.split()[0]
    assert first == f"{op_id} running: 2 matched, 0 changed, 0 skipped"
    assert second == f"`workly operation {op_id}` shows its progress"

    shown = ok(await workly(held, "operation", op_id)).out.splitlines()
    assert "state     running" in shown and "filter    queue=held" in shown and "matched   2" in shown
    assert ok(await workly(held, "operation", op_id, "--json")).json() == await get_operation(
        held.client, op_id
    )
    missing = await workly(held, "operation", "op_nope")
    assert missing.code == 1 and missing.err.startswith("workly: 404 Not Found: ")

    newer = ok(await workly(held, "retry", "--queue", "held", "--no-wait", "--json")).json()
    first_page = ok(await workly(held, "operations", "--limit", "1")).out.splitlines()
    assert first_page[1].split()[:3] == [newer["id"], "retry", "running"]
    cursor = first_page[-1].removeprefix("more: --cursor ")
    rest = ok(await workly(held, "operations", "--limit", "1", "--cursor", cursor, "--json")).json()
    assert [op["id"] for op in rest["operations"]] == [op_id] and rest["next_cursor"] is None


async def test_ctrl_c_stops_the_waiting_not_the_operation(held: E2E) -> None:
    await delayed(held, "held", 1)
    code, out, err = await asyncio.to_thread(
        on_terminal, held.server.base_url, ["cancel", "--queue", "held"], interrupt_at=b"0/1  changed 0"
    )
    assert code == 130 and b"Traceback" not in err, (out, err)
    match = re.fullmatch(rb"workly: stopped waiting; (op_\w+) continues on the server: .*\n", err)
    assert match is not None, err
    assert out.startswith(b"\r[") and out.endswith(b"\r\x1b[K")  # the progress line erased
    [stored] = await operations(held.client)
    assert (stored["id"], stored["state"]) == (match.group(1).decode(), "running")


def on_terminal(
    base_url: str, args: list[str], interrupt_at: bytes | None = None, timeout: float = 30
) -> tuple[int, bytes, bytes]:
    """`workly <args>` with its standard output on a pseudo-terminal, as a person runs it: its
    exit status, output and errors. With ``interrupt_at``: Ctrl-C (SIGINT) once the output
    holds it."""
    env = {"WORKLY_SERVER": base_url, "WORKLY_TOKEN": TEST_TOKEN, "PATH": "/usr/bin:/bin"}
    controller, terminal = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "workly", *args], env=env, stdout=terminal, stderr=subprocess.PIPE
    ) as process:
        os.close(terminal)  # the child holds it: the controller reads end-of-file once the child exits
        out = b""
        deadline = time.monotonic() + timeout
        while (chunk := _read(controller, deadline)) is not None:
            out += chunk
            if interrupt_at is not None and interrupt_at in out:
                process.send_signal(signal.SIGINT)
                interrupt_at = None
        os.close(controller)
        if process.poll() is None and time.monotonic() >= deadline:
            process.kill()  # still running at the deadline: fail, rather than wait on its stderr
        assert process.stderr is not None
        err = process.stderr.read()
        return process.wait(timeout=max(deadline - time.monotonic(), 1)), out, err


def _read(controller: int, deadline: float) -> bytes | None:
    """What the terminal shows next; None once the child has exited and closed it."""
    if not select.select([controller], [], [], max(deadline - time.monotonic(), 0))[0]:
        pytest.fail("the command printed nothing more and did not exit in time")
    try:
        return os.read(controller, 4096) or None
    except OSError:  # Linux: reading a terminal whose other end is closed is EIO
        return None


async def wait_for_operation(client: httpx.AsyncClient, op_id: str, timeout: float = 15.0) -> dict[str, Any]:
    """Poll the operation until it is no longer running."""
    deadline = time.monotonic() + timeout
    while (found := await get_operation(client, op_id))["state"] == "running":
        if time.monotonic() >= deadline:
            pytest.fail(f"operation {op_id} still running after {timeout}s: {found}")
        await asyncio.sleep(0.05)
    return found
