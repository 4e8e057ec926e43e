"""The client commands (`workly enqueue`, `tasks`, `task`, `queues`, `retry`, `cancel`,
`pause`, `resume`, and `operations`, `operation` from operations.py): each asks a running
server and prints a table, or the API's JSON with --json. Exit status 1 when the server
refuses or cannot be reached, 2 for bad input. `retry` and `cancel` act on one task, or
with filter options on every task they match (a bulk operation, operations.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from workly.client import operations as bulk
from workly.client import render, task_options
from workly.client.api import DEFAULT_SERVER, ApiClient
from workly.client.common import AsJson, Cursor, Server, Token, ask, show, show_page, usage_error
from workly.client.follow import follow_task
from workly.client.inputs import InputError, parse_delay, parse_headers, parse_time, read_data
from workly.models import TASK_STATUSES

Status = Annotated[str | None, typer.Option(help=f"only tasks of this status: {', '.join(TASK_STATUSES)}")]
TaskId = Annotated[str, typer.Argument(help="task id (task_…)")]
OneTaskId = Annotated[
    str | None,
    typer.Argument(metavar="TASK_ID", help="task id (task_…); leave it out to give filter options instead"),
]
QueueName = Annotated[str, typer.Argument(help="queue name")]


def register(app: typer.Typer) -> None:
    for command in (
        enqueue, tasks, task, queues, retry, cancel, pause, resume, bulk.operations, bulk.operation,
    ):  # fmt: skip
        app.command(rich_help_panel="Client (talks to a running server)", help=_help(command))(command)


def _help(command: Callable[..., None]) -> str:
    """The command's docstring with each paragraph on one line: rich help would keep a wrapped
    docstring's line breaks where the source has them."""
    paragraphs = inspect.cleandoc(command.__doc__ or "").split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def enqueue(
    url: Annotated[str, typer.Argument(help="where to deliver: an http or https URL")],
    queue: Annotated[str, typer.Option(help="queue (created on first use)")] = "default",
    data: Annotated[str | None, typer.Option(help="JSON body, or @file, or @- for stdin")] = None,
    delay: Annotated[str | None, typer.Option(help="deliver later: 30s, 10m, 2h, 1d")] = None,
    run_at: Annotated[
        str | None,
        typer.Option(help="deliver at this time: RFC 3339 with an offset, e.g. 2030-01-01T09:00:00Z"),
    ] = None,
    method: Annotated[str, typer.Option(help="HTTP method")] = "POST",
    header: Annotated[list[str] | None, typer.Option(help="'Name: value', repeatable")] = None,
    key: task_options.Key = None,
    tenant: task_options.Tenant = None,
    priority: task_options.Priority = None,
    max_attempts: task_options.MaxAttempts = None,
    stop_on: task_options.StopOn = None,
    deadline: task_options.Deadline = None,
    callback_url: task_options.CallbackUrl = None,
    failure_callback_url: task_options.FailureCallbackUrl = None,
    timeout: Annotated[str | None, typer.Option(help="per attempt, instead of the queue's: 30s, 2m")] = None,
    idempotency_key: Annotated[
        str | None, typer.Option(help="enqueueing again with it returns the first task")
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="wait until the task succeeds or fails; exit 1 unless it succeeded")
    ] = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Enqueue an HTTP request to URL; prints the stored task (with --wait: its outcome)."""
    try:
        body: dict[str, Any] = {"url": url, "method": method.upper()}
        if data is not None:
            body["body"] = read_data(data)
        if delay is not None and run_at is not None:
            raise InputError("give --delay or --run-at, not both")
        if delay is not None:
            body["delay"] = parse_delay(delay)
        if run_at is not None:
            body["run_at"] = parse_time(run_at)
        if timeout is not None:
            body["timeout"] = parse_delay(timeout)
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if header:
            body["headers"] = parse_headers(header)
        body.update(
            task_options.task_fields(
                key, tenant, priority, max_attempts, stop_on, deadline, callback_url, failure_callback_url
            )
        )
    except InputError as exc:
        usage_error(str(exc))
    created: list[bool] = []

    def send(api: ApiClient) -> dict[str, Any]:
        stored, is_new = api.enqueue(queue, body)
        created.append(is_new)
        return stored

    stored = ask(server, token, send)
    if not wait:
        show(stored, as_json, lambda task: render.enqueued(task, created[0]))
        return
    if not as_json:
        typer.echo(render.enqueued(stored, created[0]))
    ended = ask(server, token, lambda api: follow_task(api, stored["id"]))
    show(ended, as_json, lambda f: render.task_outcome(f["task"], f["attempts"]))
    if ended["task"]["status"] != "succeeded":
        raise typer.Exit(code=1)


def tasks(
    queue: Annotated[str | None, typer.Option(help="only this queue's tasks")] = None,
    status: Status = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="tasks per page")] = 20,
    cursor: Cursor = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List tasks, newest first."""
    if status is not None and status not in TASK_STATUSES:
        usage_error(f"--status takes {', '.join(TASK_STATUSES)}, not {status!r}")
    page = ask(server, token, lambda api: api.tasks(queue, status, limit, cursor))
    show_page(page, "tasks", as_json, render.task_rows)


def task(
    task_id: TaskId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Show a task and its attempts (with the start of each response)."""

    def both(api: ApiClient) -> dict[str, Any]:
        return {"task": api.task(task_id), "attempts": api.attempts(task_id)}

    found = ask(server, token, both)
    show(found, as_json, lambda f: render.task_detail(f["task"], f["attempts"]))


def queues(server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False) -> None:
    """List queues with their task counts."""
    found = ask(server, token, lambda api: {"queues": api.queues()})
    show(found, as_json, lambda f: render.queue_rows(f["queues"]) if f["queues"] else "no queues")


def retry(
    task_id: OneTaskId = None,
    queue: bulk.Queue = None,
    endpoint: bulk.Endpoint = None,
    event_type: bulk.EventType = None,
    tenant: bulk.Tenant = None,
    key: bulk.Key = None,
    status: bulk.Status = None,
    since: bulk.Since = None,
    until: bulk.Until = None,
    last_status_code: bulk.LastStatusCode = None,
    no_wait: bulk.NoWait = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Re-enqueue a failed or canceled task, due now; a ready task waiting for its next attempt
    is made due now.

    With filter options instead of TASK_ID: retry every failed or canceled task they match (the
    others are skipped), as an operation on the server, and show its progress until it ends.
    """
    filters = bulk.Filters(queue, endpoint, event_type, tenant, key, status, since, until, last_status_code)
    one = bulk.one_task("retry", task_id, filters)
    if one is None:
        bulk.run("retry", filters, wait=not no_wait, server=server, token=token, as_json=as_json)
    else:
        show(ask(server, token, lambda api: api.retry(one)), as_json, _task_line("ready again"))


def cancel(
    task_id: OneTaskId = None,
    queue: bulk.Queue = None,
    endpoint: bulk.Endpoint = None,
    event_type: bulk.EventType = None,
    tenant: bulk.Tenant = None,
    key: bulk.Key = None,
    status: bulk.Status = None,
    since: bulk.Since = None,
    until: bulk.Until = None,
    last_status_code: bulk.LastStatusCode = None,
    no_wait: bulk.NoWait = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Cancel a task that is waiting to be delivered.

    With filter options instead of TASK_ID: cancel every ready task they match (the others are
    skipped), as an operation on the server, and show its progress until it ends.
    """
    filters = bulk.Filters(queue, endpoint, event_type, tenant, key, status, since, until, last_status_code)
    one = bulk.one_task("cancel", task_id, filters)
    if one is None:
        bulk.run("cancel", filters, wait=not no_wait, server=server, token=token, as_json=as_json)
    else:
        show(ask(server, token, lambda api: api.cancel(one)), as_json, _task_line("canceled"))


def pause(
    queue: QueueName, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Stop delivering a queue's tasks (they stay queued)."""
    show(ask(server, token, lambda api: api.set_paused(queue, True)), as_json, _queue_line("paused"))


def resume(
    queue: QueueName, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Start delivering a paused queue's tasks again."""
    show(ask(server, token, lambda api: api.set_paused(queue, False)), as_json, _queue_line("resumed"))


def _task_line(done: str) -> Callable[[dict[str, Any]], str]:
    return lambda t: f"{t['id']} {done} (queue {t['queue']}, status {t['status']})"


def _queue_line(done: str) -> Callable[[dict[str, Any]], str]:
    return lambda q: f"queue {q['name']} {done}"
