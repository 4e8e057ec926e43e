"""The client commands, run in-process (tests/e2e/cli.py) against a real server: `workly
dev`'s app with API tokens required, one for the module, each test in queues of its own (a
test about every task the server holds has a server of its own). Input refused before
anything is sent is run with no server at all. One test runs the real `python -m workly`.

The client only speaks the API, which behaves the same on both backends (the conformance
and API suites show that), so one backend is enough.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e.cli import InProcessServer, offline, real_workly, workly
from tests.e2e.conftest import (
    E2E,
    get_task,
    wait_for_status,
)
from tests.support.servers import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


async def test_enqueue_then_watch_it_with_task_and_tasks(e2e: E2E, tmp_path: Path) -> None:
    body = tmp_path / "order.json"
    body.write_text('{"order": 42}')
    url = e2e.receiver.url("/cli")
    enqueued = await workly(
        e2e, "enqueue", url, "--queue", "orders", "--data", f"@{body}", "--header", "X-Trace: abc", "--json"
    )
    assert enqueued.code == 0, enqueued.err
    task = enqueued.json()
    assert (task["queue"], task["body"], task["headers"]["X-Trace"]) == ("orders", {"order": 42}, "abc")
    [received] = await e2e.receiver.wait_for("/cli", 1)
    assert json.loads(received.body) == {"order": 42} and received.headers["X-Trace"] == "abc"
    await wait_for_status(e2e.client, task["id"], "succeeded")

    shown = await workly(e2e, "task", task["id"])
    assert shown.code == 0, shown.err
    assert "status       succeeded" in shown.out and f"request      POST {url}" in shown.out
    attempt = shown.out.splitlines()[-1].split()
    assert (attempt[0], attempt[4]) == ("1", "204")  # attempt 1, answered 204
    detail = (await workly(e2e, "task", task["id"], "--json")).json()
    assert detail["task"]["status"] == "succeeded" and [a["status_code"] for a in detail["attempts"]] == [204]

    listed = await workly(e2e, "tasks", "--queue", "orders", "--status", "succeeded")
    assert listed.code == 0, listed.err
    header, row = listed.out.splitlines()
    assert header.split()[:3] == ["ID", "QUEUE", "STATUS"] and row.split()[:4] == [
        task["id"], "orders", "succeeded", "1/10",
    ]  # fmt: skip
    assert (await workly(e2e, "tasks", "--queue", "orders", "--status", "failed")).out.strip() == "no tasks"


async def test_tasks_pages_across_queues_with_a_cursor(fresh_e2e: E2E) -> None:
    e2e = fresh_e2e  # every task on the server is listed: only this test's may be there
    ids = []
    for queue in ("a", "b", "c"):
        run = await workly(
            e2e, "enqueue", e2e.receiver.url("/p"), "--queue", queue, "--delay", "1h", "--json"
        )
        ids.append(run.json()["id"])
    first = await workly(e2e, "tasks", "--limit", "2")
    assert [line.split()[0] for line in first.out.splitlines()[1:3]] == ids[:0:-1]
    cursor = first.out.splitlines()[-1].removeprefix("more: --cursor ")
    rest = (await workly(e2e, "tasks", "--limit", "2", "--cursor", cursor, "--json")).json()
    assert [t["id"] for t in rest["tasks"]] == ids[:1] and rest["next_cursor"] is None


async def test_retry_a_failed_task_and_cancel_a_delayed_one(e2e: E2E) -> None:
    e2e.receiver.script("/flaky", [500])
    failed = (
        await workly(e2e, "enqueue", e2e.receiver.url("/flaky"), "--max-attempts", "1", "--json")
    ).json()
    await wait_for_status(e2e.client, failed["id"], "failed")
    retried = await workly(e2e, "retry", failed["id"])
    assert (
        retried.code == 0
        and retried.out.strip() == f"{failed['id']} ready again (queue default, status ready)"
    )
    await wait_for_status(e2e.client, failed["id"], "succeeded")  # the receiver answers 204 now

    before = datetime.now(UTC).timestamp()
    later = (await workly(e2e, "enqueue", e2e.receiver.url("/later"), "--delay", "1h", "--json")).json()
    run_at = datetime.fromisoformat(later["run_at"]).timestamp()
    assert 3590 < run_at - before < 3700
    canceled = await workly(e2e, "cancel", later["id"], "--json")
    assert canceled.code == 0 and canceled.json()["status"] == "canceled"
    assert (await get_task(e2e.client, later["id"]))["status"] == "canceled"
    again = await workly(e2e, "cancel", later["id"])
    assert again.code == 1 and again.err.startswith("workly: 409 Conflict: ")


async def test_queues_pause_and_resume(e2e: E2E) -> None:
    await workly(e2e, "enqueue", e2e.receiver.url("/q"), "--queue", "held", "--delay", "1h")
    assert (await workly(e2e, "pause", "held")).out.strip() == "queue held paused"
    table = await workly(e2e, "queues")
    [row] = [line.split() for line in table.out.splitlines() if line.startswith("held ")]
    assert row[:3] == ["held", "paused", "1"]  # one ready task
    assert (await workly(e2e, "resume", "held")).out.strip() == "queue held resumed"
    [queue] = [q for q in (await workly(e2e, "queues", "--json")).json()["queues"] if q["name"] == "held"]
    assert queue["paused"] is False and queue["counts"]["ready"] == 1


async def test_bad_input_is_refused_before_anything_is_sent(e2e: E2E) -> None:
    for args, says in [
        (["--data", "{not json"], "the --data value is not JSON"),
        (["--delay", "soon"], "'soon' is not a duration"),
        (["--header", "nocolon"], "is not a header"),
    ]:
        run, sent = offline("enqueue", e2e.receiver.url("/bad"), *args)
        assert (run.code, run.out, sent) == (2, "", []) and says in run.err, run
    for args, says in [
        (["task", ""], "'' is not a task id"),
        (["tasks", "--queue", "bad/q"], "'bad/q' is not a queue name"),
        (["queues", "--server", "http://[::1"], "is not a URL"),
        (["queues", "--token", "é"], "the token holds characters"),
    ]:
        run, sent = offline(*args)
        assert (run.code, run.out, sent) == (2, "", []), run
        assert says in run.err and "Traceback" not in run.err, run
    refused = await workly(e2e, "enqueue", "ftp://127.0.0.1/x", "--queue", "refused")
    assert refused.code == 1 and refused.err.startswith(
        "workly: 422 Unprocessable Entity: The request is invalid"
    )
    stored = await workly(e2e, "tasks", "--queue", "refused", "--json")  # nothing: not even its queue
    assert (stored.code, stored.err) == (1, "workly: 404 Not Found: queue 'refused' does not exist\n")


async def test_unknown_task_wrong_token_and_no_server_exit_1_with_the_reason(e2e: E2E) -> None:
    missing = await workly(e2e, "task", "task_nope")
    assert missing.code == 1 and missing.err == "workly: 404 Not Found: task 'task_nope' does not exist\n"
    wrong = await workly(e2e, "queues", env={"WORKLY_TOKEN": "wrong"})
    assert wrong.code == 1
    assert wrong.err.startswith(
        "workly: 401 Unauthorized: the server wants a valid API token (--token or WORKLY_TOKEN)"
    )
    nobody = f"http://127.0.0.1:{free_port()}"
    gone = await workly(e2e, "queues", "--server", nobody)
    assert gone.code == 1 and gone.err.startswith(f"workly: cannot reach {nobody}: ")


async def test_enqueue_with_a_retry_policy_and_a_callback(e2e: E2E) -> None:
    e2e.receiver.script("/strict", [404])
    enqueued = await workly(
        e2e, "enqueue", e2e.receiver.url("/strict"), "--queue", "policy", "--stop-on", "4xx",
        "--stop-on", "503", "--deadline", "5m", "--failure-callback-url", e2e.receiver.url("/failed"),
        "--json",
    )  # fmt: skip
    assert enqueued.code == 0, enqueued.err
    task = enqueued.json()
    assert (task["stop_on"], task["deadline"]) == (["4xx", "503"], 300)
    [callback] = await e2e.receiver.wait_for("/failed", 1)
    assert json.loads(callback.body)["task"]["id"] == task["id"]
    shown = await workly(e2e, "task", task["id"])
    assert "4xx, 503" in shown.out and "300 s after creation/redrive" in shown.out
    assert e2e.receiver.url("/failed") in shown.out
    bad = await workly(e2e, "enqueue", e2e.receiver.url("/strict"), "--deadline", "soon")
    assert bad.code == 2 and "not a duration" in bad.err


async def test_the_real_entry_point_enqueues_and_fails_by_exit_status(e2e: E2E) -> None:
    """`python -m workly` in its own process, over the server's socket: what the tests above
    run in-process is the command a user runs, its output and its exit status."""
    run = await real_workly(e2e, "enqueue", e2e.receiver.url("/smoke"), "--queue", "smoke", "--json")
    assert run.code == 0 and not run.err, run
    task = run.json()
    await e2e.receiver.wait_for("/smoke", 1)
    await wait_for_status(e2e.client, task["id"], "succeeded")
    missing = await real_workly(e2e, "task", "task_nope")
    assert missing.code == 1 and missing.err == "workly: 404 Not Found: task 'task_nope' does not exist\n"
