"""The client commands of the event catalogue (`workly event-type …`) and of what an endpoint
receives beyond what is published to it now (`endpoint-replay`, `endpoint-test`): like the
others (commands.py), each asks a running server and prints a table, or the API's JSON with
--json; exit status 1 when the server refuses or cannot be reached, 2 for bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from workly.client import render
from workly.client.api import DEFAULT_SERVER, ApiClient
from workly.client.common import AsJson, Cursor, Server, Token, ask, show, show_page
from workly.client.inputs import InputError, parse_when, read_data
from workly.client.render import one_line

TypeName = Annotated[str, typer.Argument(help="an event type, such as invoice.paid")]
EndpointId = Annotated[str, typer.Argument(help="endpoint id (ep_…)")]
Limit = Annotated[int, typer.Option(min=1, max=500, help="rows per page")]
Description = Annotated[str | None, typer.Option(help="what the event means, for people")]
Schema = Annotated[
    str | None, typer.Option(help="a JSON Schema (2020-12): inline JSON, @file or @- (standard input)")
]
Example = Annotated[
    list[str] | None,
    typer.Option(help="an example payload (JSON, @file), repeatable; each must fit the schema"),
]

event_type_app = typer.Typer(
    help="The event catalogue: declare, show, list, change, remove event types (docs/webhooks.md).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(event_type_app, name="event-type", rich_help_panel="Client: endpoints and events")
    for name, command in (("endpoint-replay", endpoint_replay), ("endpoint-test", endpoint_test)):
        app.command(name, rich_help_panel="Client: endpoints and events")(command)


def _fields(description: str | None, schema: str | None, examples: list[str] | None,
            deprecated: bool | None) -> dict[str, Any]:  # fmt: skip
    fields: dict[str, Any] = {}
    if description is not None:
        fields["description"] = description
    if schema is not None:
        fields["schema"] = None if schema == "null" else read_data(schema, "--schema")
    if examples is not None:
        fields["examples"] = [read_data(example, "--example") for example in examples]
    if deprecated is not None:
        fields["deprecated"] = deprecated
    return fields


@event_type_app.command("put")
def put(
    event_type: TypeName, description: Description = None, schema: Schema = None, example: Example = None,
    deprecated: Annotated[bool, typer.Option("--deprecated", help="mark it deprecated")] = False,
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Declare an event type, or replace its declaration whole (fields left out: defaults)."""

    def send(api: ApiClient) -> dict[str, Any]:
        return api.put_event_type(event_type, _fields(description, schema, example, deprecated))

    show(ask(server, token, send), as_json, event_type_detail)


@event_type_app.command("update")
def update(
    event_type: TypeName, description: Description = None, schema: Schema = None, example: Example = None,
    deprecated: Annotated[
        bool | None, typer.Option("--deprecated/--not-deprecated", help="mark it deprecated, or not")
    ] = None,
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Change the fields given of an event type, keep the others (--schema null removes it)."""

    def send(api: ApiClient) -> dict[str, Any]:
        changes = _fields(description, schema, example, deprecated)
        if not changes:
            raise InputError("nothing to change: give --description, --schema, --example or --deprecated")
        return api.update_event_type(event_type, changes)

    show(ask(server, token, send), as_json, event_type_detail)


@event_type_app.command("show")
def show_type(
    event_type: TypeName, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Show an event type with its schema and examples."""
    show(ask(server, token, lambda api: api.event_type(event_type)), as_json, event_type_detail)


@event_type_app.command("list")
def list_types(
    include_deprecated: Annotated[bool, typer.Option("--all", help="deprecated types too")] = False,
    limit: Limit = 50, cursor: Cursor = None, server: Server = DEFAULT_SERVER, token: Token = None,
    as_json: AsJson = False,
) -> None:  # fmt: skip
    """List the catalogue's event types, newest first."""
    page = ask(server, token, lambda api: api.event_types(include_deprecated, limit, cursor))
    show_page(page, "event_types", as_json, event_type_rows)


@event_type_app.command("delete")
def delete(event_type: TypeName, server: Server = DEFAULT_SERVER, token: Token = None) -> None:
    """Remove an event type from the catalogue (events of it stay as they are)."""

    def send(api: ApiClient) -> dict[str, Any]:
        api.delete_event_type(event_type)
        return {}

    ask(server, token, send)
    typer.echo(f"{one_line(event_type)} removed from the catalogue")


def endpoint_replay(
    endpoint_id: EndpointId,
    since: Annotated[
        str, typer.Option(help="events published at or after it: RFC 3339 with an offset, or 30m, 2h, 1d ago")
    ],
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Deliver to the endpoint every event since a time that it takes now and never received
    (a new endpoint catches up; a disabled one gets what it missed once enabled). Runs in the
    background: follow it with `workly operation <id>`."""
    started = ask(
        server, token, lambda api: api.replay_endpoint(endpoint_id, parse_when(since, datetime.now(UTC)))
    )
    show(
        started,
        as_json,
        lambda op: (
            f"{op['id']} started: {op['matched']} events since {since} to go through; "
            f"follow it with: workly operation {op['id']}"
        ),
    )


def endpoint_test(
    endpoint_id: EndpointId,
    event_type: Annotated[
        str | None, typer.Option("--type", help="a catalogue type: its first example is sent")
    ] = None,
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Send the endpoint a test event, signed like any delivery; prints its task."""
    task = ask(server, token, lambda api: api.test_endpoint(endpoint_id, event_type))
    show(
        task,
        as_json,
        lambda t: f"{t['id']}: a test delivery to {t['url']}; follow it: workly task {t['id']}",
    )


def event_type_rows(types: Sequence[dict[str, Any]]) -> str:
    return render.table(
        ["TYPE", "SCHEMA", "EXAMPLES", "DEPRECATED", "DESCRIPTION"],
        [
            [t["type"], "yes" if t["schema"] is not None else "-", len(t["examples"]),
             "yes" if t["deprecated"] else "-", t["description"] or "-"]
            for t in types
        ],
    )  # fmt: skip


def event_type_detail(found: dict[str, Any]) -> str:
    lines = [
        f"type         {one_line(found['type'])}",
        f"description  {one_line(found['description'] or '-')}",
        f"deprecated   {'yes' if found['deprecated'] else 'no'}",
        f"schema       {_json(found['schema']) if found['schema'] is not None else '- (any payload)'}",
    ]
    lines += [f"example {n}    {_json(example)}" for n, example in enumerate(found["examples"], 1)]
    return "\n".join(lines)


def _json(value: Any) -> str:
    return one_line(json.dumps(value, ensure_ascii=False))
