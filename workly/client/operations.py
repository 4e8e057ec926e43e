"""Bulk operations from the command line. `workly retry` and `workly cancel` given filter
options instead of a task id create one on the server (POST /v1/operations) and follow its
progress until it ends; `workly operations` and `workly operation` show them. The server
does the work: stopping the client (Ctrl-C, --no-wait) never stops an operation."""

from __future__ import annotations

import sys
import time
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, TextIO

import typer

from workly.client import render
from workly.client.api import DEFAULT_SERVER, ApiClient, ClientError
from workly.client.common import AsJson, Cursor, Server, Token, ask, show, show_page, usage_error
from workly.client.follow import INTERRUPTED, UNKNOWN_OUTCOME, Outage
from workly.client.inputs import InputError, parse_when
from workly.models import TASK_STATUSES, is_queue_name
from workly.operations import CHANGES_FROM, Action

POLL_SECONDS = 0.3  # how often the progress is read at first: it moves a chunk of up to 1000 tasks at a time
MAX_POLL_SECONDS = 3.0  # … and at the most, once an operation takes long
NOT_PICKED_UP_SECONDS = 15.0  # no progress for this long: say why that may be (once)
_NOT_MOVING = (
    "workly: {id} has not moved for {seconds:g} s: is a process with the dispatcher on running "
    "(not WORKLY_DISPATCH=false)? It may also wait behind another operation."
)
_ERASE_REST = "\x1b[K"  # erase from the cursor to the end of the line (a shorter line leaves no tail)
_PANEL = "Filter: every task it matches, instead of TASK_ID"


def _filter_option(name: str, help: str) -> Any:
    return typer.Option(name, help=help, rich_help_panel=_PANEL, show_default=False)


# The filter options `workly retry` and `workly cancel` share: at least one, or a TASK_ID.
Queue = Annotated[str | None, _filter_option("--queue", "tasks in this queue")]
Endpoint = Annotated[str | None, _filter_option("--endpoint", "deliveries to this endpoint (ep_…)")]
EventType = Annotated[str | None, _filter_option("--event-type", "deliveries of events of this type")]
Tenant = Annotated[str | None, _filter_option("--tenant", "this tenant's tasks")]
Key = Annotated[str | None, _filter_option("--key", "tasks with this ordering key")]
Status = Annotated[
    str | None, _filter_option("--status", f"tasks in this status: {', '.join(TASK_STATUSES)}")
]
Since = Annotated[
    str | None,
    _filter_option("--since", "created at or after: RFC 3339 (2030-01-01T00:00:00Z) or 30s, 2h, 1d ago"),
]
Until = Annotated[
    str | None, _filter_option("--until", "created before: RFC 3339, or a duration ago like --since")
]
LastStatusCode = Annotated[
    int | None, _filter_option("--last-status-code", "tasks whose last attempt got this HTTP status")
]
NoWait = Annotated[
    bool, typer.Option("--no-wait", help="with filter options: print the operation and return at once")
]


@dataclass(frozen=True, slots=True)
class Filters:
    """The filter options as given on the command line (None: not given)."""

    queue: str | None = None
    endpoint: str | None = None
    event_type: str | None = None
    tenant: str | None = None
    key: str | None = None
    status: str | None = None
    since: str | None = None
    until: str | None = None
    last_status_code: int | None = None

    def any_given(self) -> bool:
        return any(value is not None for value in astuple(self))


def task_filter(filters: Filters, now: datetime, action: Action) -> dict[str, Any]:
    """The API's filter for the options given, with --since and --until as RFC 3339 UTC times
    (a duration counts back from ``now``). InputError names the option at fault."""
    texts = {
        "--queue": filters.queue, "--endpoint": filters.endpoint, "--event-type": filters.event_type,
        "--tenant": filters.tenant, "--key": filters.key,
    }  # fmt: skip
    for option, text in texts.items():
        if text == "":
            raise InputError(f"{option} is empty")
    if filters.queue is not None and not is_queue_name(filters.queue):
        raise InputError(f"--queue {filters.queue!r} is not a queue name")
    if filters.status is not None and filters.status not in TASK_STATUSES:
        raise InputError(f"--status {filters.status!r} is not one of {', '.join(TASK_STATUSES)}")
    changes = CHANGES_FROM[action]
    if filters.status is not None and filters.status not in changes:
        raise InputError(
            f"--status {filters.status}: {action} changes only {' and '.join(changes)} tasks, so it would "
            "change nothing (to make one ready task due now: `workly retry TASK_ID`)"
        )
    code = filters.last_status_code
    if code is not None and not 100 <= code <= 599:
        raise InputError(f"--last-status-code {code} is not an HTTP status (100 to 599)")
    after, before = _when("--since", filters.since, now), _when("--until", filters.until, now)
    if (
        after is not None
        and before is not None
        and datetime.fromisoformat(after) >= datetime.fromisoformat(before)
    ):
        raise InputError(f"--since ({after}) is not before --until ({before}): no task could match")
    built = {
        "queue": filters.queue, "endpoint_id": filters.endpoint, "event_type": filters.event_type,
        "tenant": filters.tenant, "key": filters.key, "status": filters.status, "created_after": after,
        "created_before": before, "last_status_code": code,
    }  # fmt: skip
    return {name: value for name, value in built.items() if value is not None}


def _when(option: str, text: str | None, now: datetime) -> str | None:
    if text is None:
        return None
    try:
        return parse_when(text, now)
    except InputError as exc:
        raise InputError(f"{option}: {exc}") from None


def one_task(action: str, task_id: str | None, filters: Filters) -> str | None:
    """The task id when one task is meant, None when filter options are: never both, never
    neither (a usage error), so that no command ever sends an empty filter."""
    if task_id is not None and filters.any_given():
        usage_error(
            f"give a TASK_ID or filter options, not both: `workly {action} TASK_ID` is for one task, "
            f"`workly {action} --queue …` for every task the options match"
        )
    if task_id is None and not filters.any_given():
        usage_error(
            f"give a TASK_ID, or filter options (--queue, --status, --since, …) to {action} "
            "every task they match"
        )
    return task_id


def run(
    action: Action, filters: Filters, *, wait: bool, server: str, token: str | None, as_json: bool
) -> None:
    """Create the operation and, with ``wait``, follow it to its end: exit status 1 if it failed."""
    try:
        body = task_filter(filters, datetime.now(UTC), action)
    except InputError as exc:
        usage_error(str(exc))
    # The progress line is for a person watching: redraws would garble a file, a pipe or JSON.
    progress = ProgressLine(sys.stdout) if wait and not as_json and sys.stdout.isatty() else None

    def create(api: ApiClient) -> dict[str, Any]:
        try:
            created = api.create_operation(action, body)
        except KeyboardInterrupt:
            typer.echo(
                "workly: interrupted; the operation may have been created: `workly operations` lists it",
                err=True,
            )
            raise typer.Exit(code=INTERRUPTED) from None
        return follow(api, created, progress) if wait else created

    operation = ask(server, token, create)
    show(operation, as_json, render.operation_summary if wait else _started)
    if operation["state"] == "failed":
        raise typer.Exit(code=1)


def follow(api: ApiClient, operation: dict[str, Any], progress: ProgressLine | None) -> dict[str, Any]:
    """Read the operation until it is no longer running, more slowly the longer it takes.
    Ctrl-C stops the waiting, not the operation: it says so, and exits 130. A server that
    does not answer for a while (a restart) is waited for up to UNREACHABLE_SECONDS; then,
    or on an error the server gives, the waiting ends with exit status 3: the operation's
    outcome is unknown, not failed (1)."""
    operation_id = operation["id"]
    interval, outage, warned = POLL_SECONDS, Outage(), False
    last_change = time.monotonic(), operation["updated_at"]
    try:
        while operation["state"] == "running":
            if progress is not None:
                progress.draw(render.operation_progress(operation))
            time.sleep(interval)
            interval = min(interval * 1.5, MAX_POLL_SECONDS)
            try:
                operation = api.operation(operation_id)
                outage.answered()
            except ClientError as exc:
                outage.failed(exc)
                continue
            if operation["updated_at"] != last_change[1]:
                last_change = time.monotonic(), operation["updated_at"]
            elif not warned and time.monotonic() - last_change[0] > NOT_PICKED_UP_SECONDS:
                _clear(progress)
                typer.echo(_NOT_MOVING.format(id=operation_id, seconds=NOT_PICKED_UP_SECONDS), err=True)
                warned = True
    except KeyboardInterrupt:
        _clear(progress)
        typer.echo(f"workly: stopped waiting; {_goes_on(operation_id)}", err=True)
        raise typer.Exit(code=INTERRUPTED) from None
    except ClientError as exc:
        _clear(progress)
        typer.echo(f"workly: {exc}; stopped waiting, {_goes_on(operation_id)}", err=True)
        raise typer.Exit(code=UNKNOWN_OUTCOME) from None
    _clear(progress)
    return operation


def _goes_on(operation_id: str) -> str:
    return f"{operation_id} continues on the server: `workly operation {operation_id}` shows its progress"


def _started(operation: dict[str, Any]) -> str:
    return f"{render.operation_summary(operation)}\n`workly operation {operation['id']}` shows its progress"


def _clear(progress: ProgressLine | None) -> None:
    if progress is not None:
        progress.clear()


class ProgressLine:
    """One line on a terminal, redrawn in place: a carriage return, the text, then an erase
    of whatever a longer earlier text left to its right."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._shown: str | None = None

    def draw(self, text: str) -> None:
        if text != self._shown:  # an unchanged line is left alone: no flicker between chunks
            # Marked shown before it is written: a Ctrl-C that lands right after the write
            # (the very moment a person sees the line) still finds a line to clear.
            self._shown = text
            self._write(f"\r{text}{_ERASE_REST}")

    def clear(self) -> None:
        """Leave the cursor at the start of an empty line, for what is printed next."""
        if self._shown is not None:
            self._write(f"\r{_ERASE_REST}")
            self._shown = None

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


# The commands that show operations.


def operations(
    limit: Annotated[int, typer.Option(min=1, max=500, help="operations per page")] = 20,
    cursor: Cursor = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List bulk operations (retry or cancel by filter), newest first."""
    page = ask(server, token, lambda api: api.operations(limit, cursor))
    show_page(page, "operations", as_json, render.operation_rows)


def operation(
    operation_id: Annotated[str, typer.Argument(help="operation id (op_…)")],
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Show a bulk operation and its progress."""
    show(ask(server, token, lambda api: api.operation(operation_id)), as_json, render.operation_detail)
