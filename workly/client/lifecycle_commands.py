"""The client commands of the data lifecycle (docs/retention.md): `tenant-erase` (an
operation, followed to its end), `tenant-export` (JSON Lines to a file or standard output),
`task-delete` and `event-delete`. Like the others (commands.py): exit status 1 when the
server refuses or cannot be reached, 2 for bad input."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from workly.client import render
from workly.client.api import DEFAULT_SERVER, ApiClient
from workly.client.common import AsJson, Server, Token, ask, show, usage_error
from workly.client.operations import ProgressLine, follow

TenantId = Annotated[str, typer.Argument(help="tenant id (the tenant string endpoints and events carry)")]
Yes = Annotated[bool, typer.Option("--yes", help="do it: what is deleted cannot be brought back")]


def register(app: typer.Typer) -> None:
    panel = "Client: tenants, keys, audit"
    app.command("tenant-erase", rich_help_panel=panel)(tenant_erase)
    app.command("tenant-export", rich_help_panel=panel)(tenant_export)
    app.command("task-delete", rich_help_panel="Client: tasks and queues")(task_delete)
    app.command("event-delete", rich_help_panel="Client: endpoints and events")(event_delete)


def tenant_erase(
    tenant: TenantId,
    yes: Yes = False,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="follow the operation to its end")] = True,
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Erase everything of a tenant: its endpoints, events, tasks, attempts, schedules and keys,
    then the tenant (GDPR Art. 17). Runs on the server in the background; asks for --yes."""
    if not yes:
        usage_error(f"this erases tenant {tenant!r} and everything of it for good: add --yes to do it")
    progress = ProgressLine(sys.stdout) if wait and not as_json and sys.stdout.isatty() else None

    def erase(api: ApiClient) -> dict[str, Any]:
        started = api.erase_tenant(tenant)
        return follow(api, started, progress) if wait else started

    operation = ask(server, token, erase)
    show(operation, as_json, render.operation_summary)
    if operation["state"] == "failed":
        raise typer.Exit(code=1)


def tenant_export(
    tenant: TenantId,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write to this file (default: standard output)")
    ] = None,
    server: Server = DEFAULT_SERVER, token: Token = None,
) -> None:  # fmt: skip
    """Export everything of a tenant as JSON Lines: its endpoints (without secrets), events,
    tasks and attempts, each line with its "kind" (GDPR Art. 15 and portability)."""

    def export(api: ApiClient) -> dict[str, Any]:
        if output is None:
            return {"lines": api.export_tenant(tenant, sys.stdout.buffer)}
        partial = output.with_name(output.name + ".partial")
        with partial.open("wb") as sink:
            lines = api.export_tenant(tenant, sink)
        partial.replace(output)  # only a whole export takes the name asked for
        return {"lines": lines}

    written = ask(server, token, export)
    if output is not None:
        typer.echo(f"{written['lines']} lines written to {output}", err=True)


def task_delete(
    task_id: Annotated[str, typer.Argument(help="task id (task_…)")], yes: Yes = False,
    server: Server = DEFAULT_SERVER, token: Token = None,
) -> None:  # fmt: skip
    """Delete a task with its attempts and callbacks (not while it runs). Asks for --yes."""
    _delete(f"task {task_id!r} with its attempts", task_id, yes, server, token, ApiClient.delete_task)


def event_delete(
    event_id: Annotated[str, typer.Argument(help="event id (evt_…)")], yes: Yes = False,
    server: Server = DEFAULT_SERVER, token: Token = None,
) -> None:  # fmt: skip
    """Delete an event with its deliveries and their attempts. Asks for --yes."""
    _delete(f"event {event_id!r} with its deliveries", event_id, yes, server, token, ApiClient.delete_event)


def _delete(
    what: str, object_id: str, yes: bool, server: str, token: str | None,
    call: Callable[[ApiClient, str], dict[str, Any]],
) -> None:  # fmt: skip
    if not yes:
        usage_error(f"this deletes {what}: add --yes to do it")
    ask(server, token, lambda api: call(api, object_id))
    typer.echo(f"{object_id} deleted")
