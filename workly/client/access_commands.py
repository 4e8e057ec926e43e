"""The client commands of tenants, API keys and the audit log (`workly tenant …`, `workly
key …`, `workly audit`) and the endpoint commands that change one (`endpoint-update`,
`endpoint-recover`, `endpoint-rotate`): like the others (commands.py), each asks a running
server and prints a table, or the API's JSON with --json; exit status 1 when the server
refuses or cannot be reached, 2 for bad input."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from workly.client import access_render, render
from workly.client.api import DEFAULT_SERVER, ApiClient
from workly.client.common import AsJson, Cursor, KeptFor, Server, Token, ask, show, show_page, usage_error
from workly.client.inputs import (
    InputError,
    parse_headers,
    parse_pairs,
    parse_retention,
    parse_time,
    parse_when,
    read_data,
)
from workly.client.render import one_line as render_text
from workly.signing import PRIVATE_KEY_PREFIX, generate_key_pair, generate_secret

Limit = Annotated[int, typer.Option(min=1, max=500, help="rows per page")]
TenantId = Annotated[str, typer.Argument(help="tenant id (the tenant string endpoints and events carry)")]
EndpointId = Annotated[str, typer.Argument(help="endpoint id (ep_…)")]
Name = Annotated[str | None, typer.Option(help="shown instead of the id")]
Metadata = Annotated[list[str] | None, typer.Option(help="'key=value', repeatable (replaces all)")]
Retention = Annotated[
    int | None,
    typer.Option(help="seconds its finished tasks and events are kept (0: forever; docs/retention.md)"),
]
MaxEndpoints = Annotated[int | None, typer.Option(help="at most this many endpoints")]

tenant_app = typer.Typer(help="Tenants: create, change, show, list (docs/tenants.md).", no_args_is_help=True)
key_app = typer.Typer(help="API keys: create, list, show, revoke (docs/security.md).", no_args_is_help=True)
KeyId = Annotated[str, typer.Argument(help="API key id (key_…)")]


def register(app: typer.Typer) -> None:
    panel = "Client: tenants, keys, audit"
    app.add_typer(tenant_app, name="tenant", rich_help_panel=panel)
    app.add_typer(key_app, name="key", rich_help_panel=panel)
    app.command("audit", rich_help_panel=panel)(audit)
    for name, command in (
        ("endpoint-update", endpoint_update), ("endpoint-recover", endpoint_recover),
        ("endpoint-rotate", endpoint_rotate),
    ):  # fmt: skip
        app.command(name, rich_help_panel="Client: endpoints and events")(command)


def _metadata(entries: list[str] | None) -> dict[str, str] | None:
    return None if entries is None else parse_pairs(entries, "--metadata")


def _tenant_fields(name: str | None, metadata: list[str] | None, retention: int | None,
                   max_endpoints: int | None) -> dict[str, Any]:  # fmt: skip
    fields = {
        "name": name,
        "metadata": _metadata(metadata),
        "retention": retention,
        "max_endpoints": max_endpoints,
    }
    return {k: v for k, v in fields.items() if v is not None}


# --- tenants -----------------------------------------------------------------------------


@tenant_app.command("create")
def tenant_create(
    tenant: TenantId, name: Name = None, metadata: Metadata = None, retention: Retention = None,
    max_endpoints: MaxEndpoints = None, server: Server = DEFAULT_SERVER, token: Token = None,
    as_json: AsJson = False,
) -> None:  # fmt: skip
    """Create a tenant, or replace all its fields (those left out are cleared)."""

    def put(api: ApiClient) -> dict[str, Any]:
        return api.put_tenant(tenant, _tenant_fields(name, metadata, retention, max_endpoints))

    show(ask(server, token, put), as_json, access_render.tenant_detail)


@tenant_app.command("update")
def tenant_update(
    tenant: TenantId, name: Name = None, metadata: Metadata = None, retention: Retention = None,
    max_endpoints: MaxEndpoints = None, server: Server = DEFAULT_SERVER, token: Token = None,
    as_json: AsJson = False,
) -> None:  # fmt: skip
    """Change the fields given, keep the others."""

    def change(api: ApiClient) -> dict[str, Any]:
        changes = _tenant_fields(name, metadata, retention, max_endpoints)
        if not changes:
            raise InputError("nothing to change: give --name, --metadata, --retention or --max-endpoints")
        return api.update_tenant(tenant, changes)

    show(ask(server, token, change), as_json, access_render.tenant_detail)


@tenant_app.command("show")
def tenant_show(
    tenant: TenantId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Show a tenant with its endpoint count."""
    show(ask(server, token, lambda api: api.tenant(tenant)), as_json, access_render.tenant_detail)


@tenant_app.command("list")
def tenant_list(limit: Limit = 20, cursor: Cursor = None, server: Server = DEFAULT_SERVER,
                token: Token = None, as_json: AsJson = False) -> None:  # fmt: skip
    """List tenants, newest first."""
    show_page(
        ask(server, token, lambda api: api.tenants(limit, cursor)),
        "tenants",
        as_json,
        access_render.tenant_rows,
    )


# --- keys --------------------------------------------------------------------------------


@key_app.command("create")
def key_create(
    name: Annotated[str, typer.Argument(help="who or what holds it, e.g. support-team")],
    role: Annotated[str, typer.Option(help="admin, reader or publisher")] = "reader",
    tenant: Annotated[str | None, typer.Option(help="only this tenant's objects")] = None,
    expires_at: Annotated[str | None, typer.Option(help="RFC 3339 with an offset; never if left out")] = None,
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Create an API key and print it: it is shown this once, never again."""
    if role not in ("admin", "reader", "publisher"):
        usage_error(f"--role {role!r}: admin, reader or publisher")

    def create(api: ApiClient) -> dict[str, Any]:
        expires = None if expires_at is None else parse_time(expires_at)
        return api.create_key({"name": name, "role": role, "tenant": tenant, "expires_at": expires})

    show(ask(server, token, create), as_json, access_render.new_key)


@key_app.command("list")
def key_list(limit: Limit = 20, cursor: Cursor = None, server: Server = DEFAULT_SERVER,
             token: Token = None, as_json: AsJson = False) -> None:  # fmt: skip
    """List API keys, newest first (never the keys themselves)."""
    show_page(
        ask(server, token, lambda api: api.keys(limit, cursor)), "keys", as_json, access_render.key_rows
    )


@key_app.command("show")
def key_show(
    key_id: KeyId, server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False
) -> None:
    """Show an API key's fields (never the key itself)."""
    show(ask(server, token, lambda api: api.key(key_id)), as_json, access_render.key_detail)


@key_app.command("revoke")
def key_revoke(
    key_id: Annotated[str, typer.Argument(help="API key id (key_…)")],
    server: Server = DEFAULT_SERVER, token: Token = None,
) -> None:  # fmt: skip
    """Revoke an API key: refused everywhere within a second."""

    def revoke(api: ApiClient) -> dict[str, Any]:
        api.revoke_key(key_id)
        return {}

    ask(server, token, revoke)
    typer.echo(f"revoked {key_id}")


# --- the audit log -----------------------------------------------------------------------


def audit(
    actor: Annotated[str | None, typer.Option(help="a key id (key_…), or token")] = None,
    action: Annotated[str | None, typer.Option(help="such as endpoint.update")] = None,
    tenant: Annotated[str | None, typer.Option(help="only this tenant's")] = None,
    since: Annotated[str | None, typer.Option(help="RFC 3339 with an offset")] = None,
    until: Annotated[str | None, typer.Option(help="RFC 3339 with an offset")] = None,
    limit: Limit = 20, cursor: Cursor = None, server: Server = DEFAULT_SERVER, token: Token = None,
    as_json: AsJson = False,
) -> None:  # fmt: skip
    """List audit log entries, newest first: who changed what, and every refused request."""

    def read(api: ApiClient) -> dict[str, Any]:
        times = {name: parse_time(value) for name, value in (("since", since), ("until", until))
                 if value is not None}  # fmt: skip
        return api.audit({"actor": actor, "action": action, "tenant": tenant, **times}, limit, cursor)

    show_page(ask(server, token, read), "entries", as_json, access_render.audit_rows)


# --- endpoints ---------------------------------------------------------------------------


def endpoint_update(
    endpoint_id: EndpointId,
    url: Annotated[str | None, typer.Option(help="a new URL")] = None,
    description: Annotated[str | None, typer.Option(help="what it is for")] = None,
    events: Annotated[
        list[str] | None, typer.Option("--events", help="replace its types, repeatable; '*' for every type")
    ] = None,
    header: Annotated[list[str] | None, typer.Option(help="'Name: value', repeatable (replaces all)")] = None,
    max_attempts: Annotated[int | None, typer.Option(help="attempts per delivery")] = None,
    filter_: Annotated[
        str | None, typer.Option("--filter", help="a content filter (JSON, @file); null removes it")
    ] = None,
    payload_format: Annotated[str | None, typer.Option(help="raw or envelope")] = None,
    retention: KeptFor = None,
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Change the fields given of an endpoint, keep the others."""

    def change(api: ApiClient) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        if retention is not None:
            changes["retention"] = parse_retention(retention)
        if url is not None:
            changes["url"] = url
        if description is not None:
            changes["description"] = description
        if events is not None:
            changes["event_types"] = None if events == ["*"] else events
        if header is not None:
            changes["headers"] = parse_headers(header)
        if max_attempts is not None:
            changes["max_attempts"] = max_attempts
        if filter_ is not None:
            changes["filter"] = read_data(filter_, "--filter")
        if payload_format is not None:
            changes["payload_format"] = payload_format
        if not changes:
            raise InputError(
                "nothing to change: give --url, --description, --events, --header, --max-attempts, "
                "--filter or --payload-format"
            )
        return api.update_endpoint(endpoint_id, changes)

    show(ask(server, token, change), as_json, lambda e: render.endpoint_detail(e, None))


def endpoint_recover(
    endpoint_id: EndpointId,
    since: Annotated[
        str, typer.Option(help="what failed at or after it: RFC 3339 with an offset, or 30m, 2h, 1d ago")
    ],
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Re-enqueue the endpoint's deliveries that failed since a time."""

    def recover(api: ApiClient) -> dict[str, Any]:
        return api.recover_endpoint(endpoint_id, parse_when(since, datetime.now(UTC)))

    show(
        ask(server, token, recover),
        as_json,
        lambda found: f"re-enqueued {render_text(found['recovered'])} deliveries",
    )


def endpoint_rotate(
    endpoint_id: EndpointId,
    keep_old: Annotated[
        bool, typer.Option("--keep-old/--drop-old", help="also sign with the old secret until the next one")
    ] = True,
    server: Server = DEFAULT_SERVER, token: Token = None, as_json: AsJson = False,
) -> None:  # fmt: skip
    """Give an endpoint a new signing secret of the kind it has (an HMAC whsec_ secret, or an
    ed25519 whsk_ key, whose whpk_ public key is printed instead). With --keep-old (the default)
    it signs with the old one too until the next rotation, so receivers can switch."""

    def rotate(api: ApiClient) -> dict[str, Any]:
        current = api.endpoint_secret(endpoint_id).split()
        ed25519 = bool(current) and current[0].startswith(PRIVATE_KEY_PREFIX)
        new, public = generate_key_pair() if ed25519 else (generate_secret(), None)
        old = current[:1] if keep_old else []
        api.update_endpoint(endpoint_id, {"signing_secret": " ".join([new, *old])})
        # What the receiver needs: the new secret, or the new public key (never a private key).
        return (
            {"id": endpoint_id, "public_key": public}
            if ed25519
            else {"id": endpoint_id, "signing_secret": new}
        )

    def as_text(found: dict[str, Any]) -> str:
        if found.get("public_key"):
            return f"new public key: {render_text(found['public_key'])}"
        return f"new signing secret: {render_text(found['signing_secret'])}"

    show(ask(server, token, rotate), as_json, as_text)
