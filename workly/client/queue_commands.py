"""The queue commands: `workly queue` (one queue's settings and counts), `queue-update`,
`queue-purge`, `queue-delete` (`queues`, `pause` and `resume` are in commands.py)."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from workly.client import render
from workly.client.api import DEFAULT_SERVER, ApiClient
from workly.client.common import AsJson, KeptFor, Server, Token, ask, show, usage_error
from workly.client.inputs import InputError, parse_delay, parse_retention

QueueName = Annotated[str, typer.Argument(help="queue name")]
_PANEL = "Client (talks to a running server)"


def register(app: typer.Typer) -> None:
    for name, command in (
        ("queue", queue), ("queue-update", queue_update), ("queue-purge", queue_purge),
        ("queue-delete", queue_delete),
    ):  # fmt: skip
        app.command(name, rich_help_panel=_PANEL)(command)


def queue(
    name: QueueName, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Show a queue's settings and its task counts."""
    show(ask(server, token, lambda api: api.queue(name)), as_json, render.queue_detail)


def queue_update(
    name: QueueName,
    max_concurrency: Annotated[
        int | None, typer.Option(help="deliveries at once, over all processes")
    ] = None,
    rate_limit: Annotated[
        str | None, typer.Option(help="dispatches per second, or 'none' for no limit")
    ] = None,
    max_attempts: Annotated[int | None, typer.Option(help="attempts before a task fails")] = None,
    min_backoff: Annotated[str | None, typer.Option(help="shortest wait before a retry: 1s, 500ms")] = None,
    max_backoff: Annotated[str | None, typer.Option(help="longest wait before a retry: 1h")] = None,
    timeout: Annotated[str | None, typer.Option(help="per attempt: 30s")] = None,
    ordering: Annotated[
        str | None, typer.Option(help="none, or key: one task of a key at a time, in order")
    ] = None,
    stop_on: Annotated[
        list[str] | None,
        typer.Option(help="a status (404) or class (4xx) that fails a task at once; repeatable"),
    ] = None,
    deadline: Annotated[
        str | None,
        typer.Option(help="no attempt starts later than this after a task is made (5m), or 'none'"),
    ] = None,
    retention: KeptFor = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Change some of a queue's settings (creating it with defaults for the rest if it is new);
    what is not given stays as it is."""
    try:
        changes = _changes(
            max_concurrency,
            rate_limit,
            max_attempts,
            min_backoff,
            max_backoff,
            timeout,
            ordering,
            stop_on,
            deadline,
        )
        if retention is not None:
            changes["retention"] = parse_retention(retention)
    except InputError as exc:
        usage_error(str(exc))
    if not changes:
        usage_error("give at least one setting to change (see --help)")

    show(ask(server, token, lambda api: api.configure_queue(name, changes)), as_json, render.queue_detail)


def _changes(
    max_concurrency: int | None,
    rate_limit: str | None,
    max_attempts: int | None,
    min_backoff: str | None,
    max_backoff: str | None,
    timeout: str | None,
    ordering: str | None,
    stop_on: list[str] | None,
    deadline: str | None,
) -> dict[str, Any]:
    if ordering is not None and ordering not in ("none", "key"):
        raise InputError(f"--ordering takes none or key, not {ordering!r}")
    changes: dict[str, Any] = {
        "max_concurrency": max_concurrency, "max_attempts": max_attempts, "ordering": ordering,
        "stop_on": stop_on, "min_backoff": _seconds(min_backoff), "max_backoff": _seconds(max_backoff),
        "timeout": _seconds(timeout),
    }  # fmt: skip
    changes = {key: value for key, value in changes.items() if value is not None}
    if rate_limit is not None:
        changes["rate_limit"] = None if rate_limit.lower() == "none" else _number(rate_limit, "--rate-limit")
    if deadline is not None:
        changes["deadline"] = None if deadline.lower() == "none" else parse_delay(deadline)
    return changes


def _seconds(text: str | None) -> float | None:
    return None if text is None else parse_delay(text)


def _number(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):  # nan and inf read as floats, but JSON has no such number
        raise InputError(f"{option} takes a number or none, not {text!r}")
    return value


def queue_purge(
    name: QueueName, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Delete a queue's ready tasks (running ones finish; the queue stays)."""
    purged = ask(server, token, lambda api: api.purge_queue(name))
    show(purged, as_json, lambda p: f"queue {name}: {p['purged']} ready task(s) deleted")


def queue_delete(
    name: QueueName,
    yes: Annotated[bool, typer.Option("--yes", help="do it: the queue goes with all its tasks")] = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Delete a queue with all its tasks (and their history). Asks for --yes."""
    if not yes:
        usage_error(f"this deletes queue {name!r} with all its tasks: add --yes to do it")

    def delete(api: ApiClient) -> dict[str, Any]:
        api.delete_queue(name)
        return {"name": name, "deleted": True}

    show(ask(server, token, delete), as_json, lambda d: f"queue {d['name']} deleted with its tasks")
