"""The client commands (`workly enqueue`, `tasks`, `task`, `queues`, `retry`, `cancel`,
`pause`, `resume`): each asks a running server and prints a table, or the API's JSON
with --json. Exit status 1 when the server refuses or cannot be reached, 2 for bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer

from workly.client import render
from workly.client.api import DEFAULT_SERVER, ApiClient, ClientError
from workly.client.inputs import InputError, parse_delay, parse_headers, read_data
from workly.models import TASK_STATUSES

Server = Annotated[
    str, typer.Option("--server", envvar="WORKLY_SERVER", help="Workly's base URL", show_default=True)
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="WORKLY_TOKEN", help="an API token (WORKLY_API_TOKENS)", show_default=False
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="print the API's JSON instead of a table")]
Status = Annotated[str | None, typer.Option(help=f"only tasks of this status: {', '.join(TASK_STATUSES)}")]
TaskId = Annotated[str, typer.Argument(help="task id (task_…)")]
QueueName = Annotated[str, typer.Argument(help="queue name")]


def register(app: typer.Typer) -> None:
    for command in (enqueue, tasks, task, queues, retry, cancel, pause, resume):
        app.command(rich_help_panel="Client (talks to a running server)")(command)


def enqueue(
    url: Annotated[str, typer.Argument(help="where to deliver: an http or https URL")],
    queue: Annotated[str, typer.Option(help="queue (created on first use)")] = "default",
    data: Annotated[str | None, typer.Option(help="JSON body, or @file, or @- for stdin")] = None,
    delay: Annotated[str | None, typer.Option(help="deliver later: 30s, 10m, 2h, 1d")] = None,
    method: Annotated[str, typer.Option(help="HTTP method")] = "POST",
    header: Annotated[list[str] | None, typer.Option(help="'Name: value', repeatable")] = None,
    key: Annotated[str | None, typer.Option(help="ordering key")] = None,
    tenant: Annotated[str | None, typer.Option(help="tenant, for fair sharing")] = None,
    priority: Annotated[int | None, typer.Option(help="higher first")] = None,
    max_attempts: Annotated[int | None, typer.Option(help="attempts before the task fails")] = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Enqueue an HTTP request to URL; prints the stored task."""
    try:
        body: dict[str, Any] = {"url": url, "method": method.upper()}
        if data is not None:
            body["body"] = read_data(data)
        if delay is not None:
            body["delay"] = parse_delay(delay)
        if header:
            body["headers"] = parse_headers(header)
    except InputError as exc:
        _usage_error(str(exc))
    optional = {"key": key, "tenant": tenant, "priority": priority, "max_attempts": max_attempts}
    body.update({name: value for name, value in optional.items() if value is not None})
    stored = _ask(server, token, lambda api: api.enqueue(queue, body))
    _print(stored, as_json, render.enqueued)


def tasks(
    queue: Annotated[str | None, typer.Option(help="only this queue's tasks")] = None,
    status: Status = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="tasks per page")] = 20,
    cursor: Annotated[str | None, typer.Option(help="next page: the cursor a previous page printed")] = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List tasks, newest first."""
    page = _ask(server, token, lambda api: api.tasks(queue, status, limit, cursor))
    if as_json:
        typer.echo(json.dumps(page, indent=2))
        return
    typer.echo(render.task_rows(page["tasks"]) if page["tasks"] else "no tasks")
    if page["next_cursor"]:
        typer.echo(f"more: --cursor {page['next_cursor']}")


def task(
    task_id: TaskId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Show a task and its attempts (with the start of each response)."""

    def both(api: ApiClient) -> dict[str, Any]:
        return {"task": api.task(task_id), "attempts": api.attempts(task_id)}

    found = _ask(server, token, both)
    _print(found, as_json, lambda f: render.task_detail(f["task"], f["attempts"]))


def queues(server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False) -> None:
    """List queues with their task counts."""
    found = _ask(server, token, lambda api: {"queues": api.queues()})
    _print(found, as_json, lambda f: render.queue_rows(f["queues"]) if f["queues"] else "no queues")


def retry(
    task_id: TaskId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Re-enqueue a failed or canceled task, due now."""
    _print(_ask(server, token, lambda api: api.retry(task_id)), as_json, _task_line("ready again"))


def cancel(
    task_id: TaskId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Cancel a task that is waiting to be delivered."""
    _print(_ask(server, token, lambda api: api.cancel(task_id)), as_json, _task_line("canceled"))


def pause(
    queue: QueueName, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Stop delivering a queue's tasks (they stay queued)."""
    _print(_ask(server, token, lambda api: api.set_paused(queue, True)), as_json, _queue_line("paused"))


def resume(
    queue: QueueName, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Start delivering a paused queue's tasks again."""
    _print(_ask(server, token, lambda api: api.set_paused(queue, False)), as_json, _queue_line("resumed"))


def _ask(server: str, token: str | None, call: Callable[[ApiClient], dict[str, Any]]) -> dict[str, Any]:
    try:
        with ApiClient(server, token) as api:
            return call(api)
    except InputError as exc:
        _usage_error(str(exc))
    except ClientError as exc:
        typer.echo(f"workly: {exc}", err=True)
        raise typer.Exit(code=1) from None


def _print(found: dict[str, Any], as_json: bool, as_text: Callable[[dict[str, Any]], str]) -> None:
    typer.echo(json.dumps(found, indent=2) if as_json else as_text(found))


def _task_line(done: str) -> Callable[[dict[str, Any]], str]:
    return lambda t: f"{t['id']} {done} (queue {t['queue']}, status {t['status']})"


def _queue_line(done: str) -> Callable[[dict[str, Any]], str]:
    return lambda q: f"queue {q['name']} {done}"


def _usage_error(reason: str) -> NoReturn:
    typer.echo(f"workly: {reason}", err=True)
    raise typer.Exit(code=2)
