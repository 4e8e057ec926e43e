"""The client commands of schedules, cron that enqueues a task or publishes an event
(`workly schedules`, `schedule`, `schedule-create`, `schedule-pause`, `schedule-resume`,
`schedule-trigger`, `schedule-delete`): like the endpoint commands (webhooks.py), each asks
a running server and prints a table, or the API's JSON with --json; exit status 1 when the
server refuses or cannot be reached, 2 for bad input."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from workly.client import schedule_render
from workly.client.api import DEFAULT_SERVER, ApiClient
from workly.client.common import AsJson, Cursor, Server, Token, ask, show, show_page, usage_error
from workly.client.inputs import InputError, parse_headers, read_data

ScheduleId = Annotated[str, typer.Argument(help="schedule id (sch_…)")]
CATCH_UP = ("latest", "none")
DEFAULT_QUEUE = "default"
DEFAULT_METHOD = "POST"


def register(app: typer.Typer) -> None:
    for name, command in (
        ("schedules", schedules), ("schedule", schedule), ("schedule-create", schedule_create),
        ("schedule-pause", schedule_pause), ("schedule-resume", schedule_resume),
        ("schedule-trigger", schedule_trigger), ("schedule-delete", schedule_delete),
    ):  # fmt: skip
        app.command(name, rich_help_panel="Client: schedules")(command)


def schedules(
    limit: Annotated[int, typer.Option(min=1, max=500, help="rows per page")] = 20,
    cursor: Cursor = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List schedules, newest first, with their next and last run."""
    page = ask(server, token, lambda api: api.schedules(limit, cursor))
    show_page(page, "schedules", as_json, schedule_render.schedule_rows)


def schedule(
    schedule_id: ScheduleId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Show a schedule: what it makes, its last run and its next 5 runs."""
    show(ask(server, token, lambda api: api.schedule(schedule_id)), as_json, schedule_render.schedule_detail)


def schedule_create(
    cron: Annotated[
        str,
        typer.Argument(
            metavar="CRON", help="minute hour day-of-month month day-of-week, quoted: '*/5 * * * *'"
        ),
    ],
    url: Annotated[
        str | None,
        typer.Argument(metavar="URL", help="the task's URL (http or https); leave it out with --event"),
    ] = None,
    event: Annotated[
        str | None,
        typer.Option("--event", metavar="TYPE", help="publish an event of this type instead of a task"),
    ] = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone the cron is read in")] = "UTC",
    queue: Annotated[
        str | None, typer.Option(help=f'the task\'s queue (default "{DEFAULT_QUEUE}")', show_default=False)
    ] = None,
    data: Annotated[
        str | None, typer.Option(help="the task's body or the event's payload: JSON, @file, or @- for stdin")
    ] = None,
    name: Annotated[str | None, typer.Option(help="for people; need not be unique")] = None,
    method: Annotated[
        str | None,
        typer.Option(help=f"the task's HTTP method (default {DEFAULT_METHOD})", show_default=False),
    ] = None,
    header: Annotated[list[str] | None, typer.Option(help="the task's 'Name: value', repeatable")] = None,
    paused: Annotated[
        bool, typer.Option("--paused", help="create it paused: schedule-resume starts it")
    ] = False,
    catch_up: Annotated[
        str,
        typer.Option(help="after downtime: latest fires once for the missed runs, none waits for the next"),
    ] = "latest",
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Create a schedule: a task to URL (or an event, --event) at each time CRON matches."""
    try:
        body: dict[str, Any] = {
            "cron": cron,
            "timezone": tz,
            "paused": paused,
            "catch_up": _catch_up(catch_up),
        }
        if event is None:
            body.update(_task_schedule(url, queue, method, header, data))
        else:
            body.update(_event_schedule(event, url, queue, method, header, data))
    except InputError as exc:
        usage_error(str(exc))
    if name is not None:
        body["name"] = name
    created = ask(server, token, lambda api: api.create_schedule(body))
    show(created, as_json, schedule_render.schedule_created)


def schedule_pause(
    schedule_id: ScheduleId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Pause a schedule: it does not fire until resumed (the tasks it made stay)."""
    paused = ask(server, token, lambda api: api.set_schedule_paused(schedule_id, True))
    show(paused, as_json, lambda s: schedule_render.schedule_state("paused", s))


def schedule_resume(
    schedule_id: ScheduleId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Resume a paused schedule: it fires again from its next time after now."""
    resumed = ask(server, token, lambda api: api.set_schedule_paused(schedule_id, False))
    show(resumed, as_json, lambda s: schedule_render.schedule_state("resumed", s))


def schedule_trigger(
    schedule_id: ScheduleId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Fire a schedule once now (also a paused one); prints the id of the task or event it made."""
    fired = ask(server, token, lambda api: api.trigger_schedule(schedule_id))
    show(fired, as_json, schedule_render.triggered)


def schedule_delete(
    schedule_id: ScheduleId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Delete a schedule; the tasks and events it made stay."""

    def delete(api: ApiClient) -> dict[str, Any]:
        api.delete_schedule(schedule_id)
        return {"id": schedule_id, "deleted": True}

    show(ask(server, token, delete), as_json, lambda d: f"{d['id']} deleted")


def _catch_up(value: str) -> str:
    if value not in CATCH_UP:
        raise InputError(f"--catch-up {value!r}: give latest (fire once for missed runs) or none (skip them)")
    return value


def _task_schedule(
    url: str | None, queue: str | None, method: str | None, header: list[str] | None, data: str | None
) -> dict[str, Any]:
    """The queue and task of a task schedule."""
    if url is None:
        raise InputError("give the URL each firing enqueues a task to, or --event TYPE to publish an event")
    task: dict[str, Any] = {"url": url, "method": (method or DEFAULT_METHOD).upper()}
    if header:
        task["headers"] = parse_headers(header)
    if data is not None:
        task["body"] = read_data(data)
    return {"queue": queue or DEFAULT_QUEUE, "task": task}


def _event_schedule(
    event_type: str,
    url: str | None,
    queue: str | None,
    method: str | None,
    header: list[str] | None,
    data: str | None,
) -> dict[str, Any]:
    """The event of an event schedule; what only a task has is refused rather than dropped."""
    task_only = {"URL": url, "--queue": queue, "--method": method, "--header": header}
    given = [what for what, value in task_only.items() if value]
    if given:
        raise InputError(f"--event makes an event schedule, which takes no {', '.join(given)}")
    event: dict[str, Any] = {"type": event_type}
    if data is not None:
        event["payload"] = read_data(data)
    return {"event": event}
