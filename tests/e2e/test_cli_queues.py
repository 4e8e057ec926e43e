"""The queue commands and enqueue's newer options: the `workly` command run in-process
(tests/e2e/cli.py) against one server for the module, `workly dev`'s app with API tokens, each
test in queues of its own. Input refused before anything is sent needs no server: it is run
with none, and nothing may have been sent. One test runs the real `python -m workly`."""

from __future__ import annotations

import pytest

from tests.e2e.cli import InProcessServer, Run, offline, real_workly, workly
from tests.e2e.conftest import E2E, get_task

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def workly_server(app_server: InProcessServer) -> InProcessServer:
    return app_server


def ok(run: Run) -> Run:
    assert run.code == 0 and not run.err, run
    return run


async def test_configure_show_purge_and_delete_a_queue(e2e: E2E) -> None:
    settings = ["--max-concurrency", "7", "--rate-limit", "2.5", "--timeout", "5s", "--stop-on", "404",
                "--stop-on", "5xx"]  # fmt: skip
    made = ok(await workly(e2e, "queue-update", "mail", *settings, "--json")).json()
    assert (made["max_concurrency"], made["rate_limit"], made["timeout"]) == (7, 2.5, 5.0)
    assert (
        made["stop_on"] == ["404", "5xx"] and made["max_attempts"] == 10
    )  # a new queue: defaults for the rest
    changed = ok(
        await workly(e2e, "queue-update", "mail", "--rate-limit", "none", "--deadline", "10m", "--json")
    )
    assert (changed.json()["rate_limit"], changed.json()["deadline"], changed.json()["max_concurrency"]) == (
        None, 600.0, 7,
    )  # fmt: skip
    ok(await workly(e2e, "pause", "mail"))
    for _ in range(3):
        ok(await workly(e2e, "enqueue", e2e.receiver.url("/never"), "--queue", "mail"))
    shown = ok(await workly(e2e, "queue", "mail")).out
    assert "state        paused" in shown and "concurrency  7" in shown and "3 ready" in shown
    assert ok(await workly(e2e, "queue-purge", "mail")).out.strip() == "queue mail: 3 ready task(s) deleted"
    refused = await workly(e2e, "queue-delete", "mail")
    assert refused.code == 2 and "--yes" in refused.err
    assert (await e2e.client.get("/v1/queues/mail")).status_code == 200  # still there
    ok(await workly(e2e, "queue-delete", "mail", "--yes"))
    assert (await e2e.client.get("/v1/queues/mail")).status_code == 404
    assert e2e.receiver.at("/never") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["queue-update", "q"], "at least one setting"),
        (["queue-update", "q", "--ordering", "fifo"], "--ordering takes none or key"),
        (["queue-update", "q", "--timeout", "soon"], "not a duration"),
        (["queue-update", "q", "--rate-limit", "fast"], "--rate-limit takes a number or none"),
        (["queue-update", "q", "--rate-limit", "nan"], "--rate-limit takes a number or none"),
        (["queue-update", "q", "--rate-limit", "inf"], "--rate-limit takes a number or none"),
        (["queue-update", "bad name!", "--timeout", "5s"], "not a queue name"),
        (["tasks", "--status", "done"], "--status takes ready, running, succeeded, failed, canceled"),
        (["enqueue", "http://127.0.0.1:9/", "--run-at", "tomorrow"], "not a time"),
        (["enqueue", "http://127.0.0.1:9/", "--run-at", "2030-01-01T09:00:00"], "no UTC offset"),
        (["enqueue", "http://127.0.0.1:9/", "--delay", "5s", "--run-at", "2030-01-01T09:00:00Z"], "not both"),
    ],
)
def test_bad_input_exits_2_before_anything_is_sent(args: list[str], message: str) -> None:
    run, sent = offline(*args)
    assert run.code == 2 and message in run.err, run
    assert sent == []


async def test_enqueue_with_a_time_a_timeout_and_an_idempotency_key(e2e: E2E) -> None:
    url = e2e.receiver.url("/later")
    args = ["enqueue", url, "--run-at", "2099-01-01T09:00:00+01:00", "--timeout", "7s",
            "--idempotency-key", "order-1", "--json"]  # fmt: skip
    first = ok(await workly(e2e, *args)).json()
    again = ok(await workly(e2e, *args)).json()
    assert again["id"] == first["id"]  # the key matched: the same task
    assert (first["run_at"], first["timeout"], first["idempotency_key"]) == (
        "2099-01-01T08:00:00Z", 7.0, "order-1",
    )  # fmt: skip
    said = ok(await workly(e2e, *args[:-1])).out  # as a table: it says the key matched
    assert said.startswith(first["id"]) and said.rstrip().endswith("(enqueued before: same idempotency key)")


async def test_wait_prints_the_outcome_and_exits_by_it(e2e: E2E) -> None:
    e2e.receiver.script("/flaky", [503])
    done = ok(await workly(e2e, "enqueue", e2e.receiver.url("/flaky"), "--queue", "fast", "--wait"))
    task_id = done.out.split()[0]
    assert done.out.splitlines()[-1] == f"{task_id} succeeded after 2 attempts: 204"
    e2e.receiver.script("/gone", [410])
    gone = await workly(e2e, "enqueue", e2e.receiver.url("/gone"), "--wait", "--json")
    assert gone.code == 1 and gone.json()["task"]["status"] == "failed"
    assert (await get_task(e2e.client, gone.json()["task"]["id"]))["last_status_code"] == 410


async def test_the_real_entry_point_configures_a_queue(e2e: E2E) -> None:
    """`python -m workly` in its own process, over the server's socket: what the tests above
    run in-process is the command a user runs."""
    made = ok(await real_workly(e2e, "queue-update", "smoke", "--max-concurrency", "3", "--json")).json()
    assert (made["name"], made["max_concurrency"]) == ("smoke", 3)
    assert (await e2e.client.get("/v1/queues/smoke")).json()["max_concurrency"] == 3
