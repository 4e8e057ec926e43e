"""The client commands of the webhook platform (`workly endpoints`, `endpoint`,
`endpoint-create`, `endpoint-enable`, `endpoint-disable`, `endpoint-delete`, `publish`,
`events`, `event`): like the task commands (commands.py), each asks a running server and
prints a table, or the API's JSON with --json; exit status 1 when the server refuses or
cannot be reached, 2 for bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from workly.client import render
from workly.client.api import DEFAULT_SERVER, ApiClient, ClientError
from workly.client.common import AsJson, Cursor, Server, Token, ask, show, show_page, usage_error
from workly.client.inputs import InputError, parse_delay, parse_headers, parse_pairs, read_data
from workly.signing import generate_key_pair, public_key_of

EndpointId = Annotated[str, typer.Argument(help="endpoint id (ep_…)")]
Limit = Annotated[int, typer.Option(min=1, max=500, help="rows per page")]
Tenant = Annotated[str | None, typer.Option(help="only this tenant's")]
EVERY_TYPE = "*"


def register(app: typer.Typer) -> None:
    for name, command in (
        ("endpoints", endpoints), ("endpoint", endpoint), ("endpoint-create", endpoint_create),
        ("endpoint-enable", endpoint_enable), ("endpoint-disable", endpoint_disable),
        ("endpoint-delete", endpoint_delete), ("publish", publish), ("events", events), ("event", event),
    ):  # fmt: skip
        app.command(name, rich_help_panel="Client: endpoints and events")(command)


def endpoints(
    tenant: Tenant = None,
    limit: Limit = 20,
    cursor: Cursor = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List endpoints, newest first, with their health."""
    page = ask(server, token, lambda api: api.endpoints(tenant, limit, cursor))
    show_page(page, "endpoints", as_json, render.endpoint_rows)


def endpoint(
    endpoint_id: EndpointId,
    secret: Annotated[bool, typer.Option("--secret", help="also show its signing secret")] = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Show an endpoint in full, with its health (and its signing secret with --secret)."""

    def read(api: ApiClient) -> dict[str, Any]:
        found = api.endpoint(endpoint_id)
        return {**found, "signing_secret": api.endpoint_secret(endpoint_id)} if secret else found

    show(ask(server, token, read), as_json, lambda e: render.endpoint_detail(e, e.get("signing_secret")))


def endpoint_create(
    url: Annotated[str, typer.Argument(help="where to deliver events: an http or https URL")],
    events: Annotated[
        list[str],
        typer.Option(
            "--events", help="a type (invoice.paid) or prefix (invoice.*), repeatable; '*' for every type"
        ),
    ],
    tenant: Annotated[str | None, typer.Option(help="receive only this tenant's events")] = None,
    description: Annotated[str | None, typer.Option(help="what the endpoint is for")] = None,
    header: Annotated[list[str] | None, typer.Option(help="'Name: value' sent with every delivery")] = None,
    ed25519: Annotated[
        bool,
        typer.Option(
            "--ed25519", help="sign with a new ed25519 key (v1a): the receiver gets only its public key"
        ),
    ] = False,
    filter_: Annotated[
        str | None,
        typer.Option("--filter", help='a content filter (JSON, @file), e.g. \'{"labels.region": "eu"}\''),
    ] = None,
    envelope: Annotated[
        bool, typer.Option("--envelope", help="deliver {type, timestamp, data} instead of the bare payload")
    ] = False,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Register an endpoint; prints its id and what its receiver verifies with (the signing
    secret, or with --ed25519 the public key)."""
    try:
        body: dict[str, Any] = {"url": url, "event_types": _event_types(events)}
        if filter_ is not None:
            body["filter"] = read_data(filter_, "--filter")
        if envelope:
            body["payload_format"] = "envelope"
        if ed25519:
            body["signing_secret"] = generate_key_pair()[0]  # made here, kept only by the server
        if header:
            body["headers"] = parse_headers(header)
    except InputError as exc:
        usage_error(str(exc))
    optional = {"tenant": tenant, "description": description}
    body.update({name: value for name, value in optional.items() if value is not None})

    def create(api: ApiClient) -> dict[str, Any]:
        created = api.create_endpoint(body)
        if ed25519:
            return {**created, "public_key": public_key_of(body["signing_secret"])}
        try:
            return {**created, "signing_secret": api.endpoint_secret(created["id"])}
        except ClientError as exc:
            raise ClientError(
                f"{created['id']} created, but its signing secret could not be read: {exc}"
            ) from None

    show(ask(server, token, create), as_json, render.endpoint_created)


def endpoint_enable(
    endpoint_id: EndpointId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Enable an endpoint: it receives new events, and its held deliveries flow again."""
    show(ask(server, token, lambda api: api.set_enabled(endpoint_id, True)), as_json, _state_line("enabled"))


def endpoint_disable(
    endpoint_id: EndpointId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Disable an endpoint: no new events reach it, its pending deliveries are held."""
    show(
        ask(server, token, lambda api: api.set_enabled(endpoint_id, False)), as_json, _state_line("disabled")
    )


def endpoint_delete(
    endpoint_id: EndpointId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Delete an endpoint with its pending deliveries."""

    def delete(api: ApiClient) -> dict[str, Any]:
        api.delete_endpoint(endpoint_id)
        return {"id": endpoint_id, "deleted": True}

    show(ask(server, token, delete), as_json, lambda d: f"{d['id']} deleted")


def publish(
    event_type: Annotated[str, typer.Argument(metavar="TYPE", help="the event's type, such as invoice.paid")],
    data: Annotated[str, typer.Option(help="the payload: JSON, or @file, or @- for stdin")],
    tenant: Annotated[str | None, typer.Option(help="reaches only this tenant's endpoints")] = None,
    key: Annotated[str | None, typer.Option(help="ordering key on each endpoint")] = None,
    idempotency_key: Annotated[
        str | None, typer.Option(help="publishing again with it returns the first event")
    ] = None,
    delay: Annotated[str | None, typer.Option(help="deliver later: 30s, 10m, 2h, 1d")] = None,
    label: Annotated[
        list[str] | None, typer.Option(help="'key=value' for endpoint filters, repeatable")
    ] = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Publish an event to every subscribed endpoint; prints its id and its deliveries."""
    try:
        body: dict[str, Any] = {"type": event_type, "payload": read_data(data)}
        if delay is not None:
            body["delay"] = parse_delay(delay)
        if label:
            body["labels"] = parse_pairs(label, "--label")
    except InputError as exc:
        usage_error(str(exc))
    optional = {"tenant": tenant, "key": key, "idempotency_key": idempotency_key}
    body.update({name: value for name, value in optional.items() if value is not None})
    created: list[bool] = []

    def send(api: ApiClient) -> dict[str, Any]:
        stored, is_new = api.publish(body)
        created.append(is_new)
        return stored

    show(ask(server, token, send), as_json, lambda e: render.published(e, created[0]))


def events(
    event_type: Annotated[str | None, typer.Option("--type", help="only events of this type")] = None,
    tenant: Tenant = None,
    limit: Limit = 20,
    cursor: Cursor = None,
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """List events, newest first, with how their deliveries stand."""
    page = ask(server, token, lambda api: api.events(event_type, tenant, limit, cursor))
    show_page(page, "events", as_json, render.event_rows)


def event(
    event_id: Annotated[str, typer.Argument(help="event id (evt_…)")],
    server: Server = DEFAULT_SERVER,
    token: Token = None,
    as_json: AsJson = False,
) -> None:
    """Show an event, its payload and each delivery with its status."""
    show(ask(server, token, lambda api: api.event(event_id)), as_json, render.event_detail)


def _event_types(values: list[str]) -> list[str] | None:
    """--events values → the API's event_types; '*' alone is every type (null)."""
    if EVERY_TYPE in values:
        if len(values) > 1:
            raise InputError("--events '*' means every type: give it alone, or name the types")
        return None
    return values


def _state_line(done: str) -> Callable[[dict[str, Any]], str]:
    return lambda e: f"{e['id']} {done} (state {e['health']['state']})"
