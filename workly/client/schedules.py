"""The client commands of schedules, cron that enqueues a task or publishes an event
(`workly schedules`, `schedule`, `schedule-create`, `schedule-update`, `schedule-pause`,
`schedule-resume`, `schedule-trigger`, `schedule-delete`): like the endpoint commands
(webhooks.py), each asks a running server and prints a table, or the API's JSON with --json;
exit status 1 when the server refuses or cannot be reached, 2 for bad input."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from workly.client import schedule_render, task_options
from workly.client.api import DEFAULT_SERVER, ApiClient
from workly.client.common import AsJson, Cursor, Server, Token, ask, show, show_page, usage_error
from workly.client.inputs import InputError, parse_headers, read_data
from workly.schedules import CATCH_UP

ScheduleId = Annotated[str, typer.Argument(help="schedule id (sch_…)")]
CRON_HELP = "minute hour day-of-month month day-of-week, quoted: '*/5 * * * *'"
Zone = Annotated[str | None, typer.Option("--tz", metavar="ZONE", help="IANA time zone the cron is read in")]
Name = Annotated[str | None, typer.Option(help="for people; need not be unique")]
CatchUp = Annotated[
    str | None,
    typer.Option(
        metavar="latest|none",
        help="after downtime: latest fires once for the missed runs, none waits for the next",
    ),
]
DEFAULT_QUEUE = "default"
DEFAULT_METHOD = "POST"
# What an event takes of the task options (the rest only a task has): workly/api/webhook_schemas.py EventIn.
EVENT_FIELDS = frozenset({"tenant", "key", "callback_url", "failure_callback_url"})


def register(app: typer.Typer) -> None:
    for name, command in (
        ("schedules", schedules), ("schedule", schedule), ("schedule-create", schedule_create),
        ("schedule-update", schedule_update), ("schedule-pause", schedule_pause),
        ("schedule-resume", schedule_resume), ("schedule-trigger", schedule_trigger),
        ("schedule-delete", schedule_delete),
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
        typer.Argument(metavar="CRON", help=CRON_HELP),
    ],
    url: Annotated[
        str | None,
        typer.Argument(metavar="URL", help="the task's URL (http or https); leave it out with --event"),
    ] = None,
    event: Annotated[
        str | None,
        typer.Option("--event", metavar="TYPE", help="publish an event of this type instead of a task"),
    ] = None,
    tz: Zone = "UTC",
    queue: Annotated[
        str | None, typer.Option(help=f'the task\'s queue (default "{DEFAULT_QUEUE}")', show_default=False)
    ] = None,
    data: Annotated[
        str | None, typer.Option(help="the task's body or the event's payload: JSON, @file, or @- for stdin")
    ] = None,
    name: Name = None,
    method: Annotated[
        str | None,
        typer.Option(help=f"the task's HTTP method (default {DEFAULT_METHOD})", show_default=False),
    ] = None,
    header: Annotated[list[str] | None, typer.Option(help="the task's 'Name: value', repeatable")] = None,
    key: task_options.Key = None,
    tenant: task_options.Tenant = None,
    priority: task_options.Priority = None,
    max_attempts: task_options.MaxAttempts = None,
    stop_on: task_options.StopOn = None,
    deadline: task_options.Deadline = None,
    callback_url: task_options.CallbackUrl = None,
    failure_callback_url: task_options.FailureCallbackUrl = None,
    paused: Annotated[
        bool, typer.Option("--paused", help="create it paused: schedule-resume starts it")
    ] = False,
    catch_up: CatchUp = "latest",
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Create a schedule: a task to URL (or an event, --event) at each time CRON matches.

    With --event: --key, --tenant and the callback URLs are the event's; other task options fail."""
    body: dict[str, Any] = {"cron": cron, "timezone": tz, "paused": paused, "catch_up": _catch_up(catch_up)}
    try:
        options = task_options.task_fields(
            key, tenant, priority, max_attempts, stop_on, deadline, callback_url, failure_callback_url
        )
        body.update(_template(event, url, queue, method, header, data, options))
    except InputError as exc:
        usage_error(str(exc))
    if name is not None:
        body["name"] = name
    created = ask(server, token, lambda api: api.create_schedule(body))
    show(created, as_json, schedule_render.schedule_created)


def schedule_update(
    schedule_id: ScheduleId,
    cron: Annotated[str | None, typer.Option(metavar="CRON", help=CRON_HELP)] = None,
    tz: Zone = None,
    name: Name = None,
    no_name: Annotated[bool, typer.Option("--no-name", help="remove its name")] = False,
    catch_up: CatchUp = None,
    queue: Annotated[
        str | None, typer.Option(help="a task schedule's queue: the tasks it makes from now on go there")
    ] = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Change a schedule: only what the options give changes.

    A new --cron or --tz moves its next run to the first time after now that it matches."""
    if name is not None and no_name:
        usage_error("give --name NAME or --no-name, not both")
    given = {"cron": cron, "timezone": tz, "name": name, "catch_up": _catch_up(catch_up), "queue": queue}
    changes: dict[str, str | None] = {field: value for field, value in given.items() if value is not None}
    if no_name:
        changes["name"] = None  # the API's way of removing it
    if not changes:
        usage_error("nothing to change: give --cron, --tz, --name, --no-name, --catch-up or --queue")
    updated = ask(server, token, lambda api: api.update_schedule(schedule_id, changes))
    show(updated, as_json, lambda s: schedule_render.schedule_state("updated", s))


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


def _catch_up(value: str | None) -> str | None:
    if value is not None and value not in CATCH_UP:
        usage_error(f"--catch-up {value!r}: give latest (fire once for missed runs) or none (skip them)")
    return value


def _template(
    event_type: str | None,
    url: str | None,
    queue: str | None,
    method: str | None,
    header: list[str] | None,
    data: str | None,
    options: dict[str, Any],
) -> dict[str, Any]:
    """What each firing makes: the queue and task of a task schedule, or the event of an event
    schedule (``event_type``), whose payload is required (as `workly publish` requires it) and
    which refuses what only a task has rather than drop it. ``options``: task_options.task_fields."""
    if event_type is not None:
        task_only: dict[str, object] = {"URL": url, "--queue": queue, "--method": method, "--header": header}
        task_only.update({f"--{f.replace('_', '-')}": v for f, v in options.items() if f not in EVENT_FIELDS})
        given = [what for what, value in task_only.items() if value is not None]
        if given:
            raise InputError(f"--event makes an event schedule, which takes no {', '.join(given)}")
        if data is None:
            raise InputError("--event needs --data: the event's payload (JSON, @file, or @- for stdin)")
        return {"event": {"type": event_type, "payload": read_data(data), **options}}
    if url is None:
        raise InputError("give the URL each firing enqueues a task to, or --event TYPE to publish an event")
    task: dict[str, Any] = {"url": url, "method": (method or DEFAULT_METHOD).upper(), **options}
    if header:
        task["headers"] = parse_headers(header)
    if data is not None:
        task["body"] = read_data(data)
    return {"queue": queue or DEFAULT_QUEUE, "task": task}
