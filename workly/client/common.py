"""What every client command shares: the --server, --token and --json options, asking the
server (exit 1 when it refuses or cannot be reached, 2 for bad input) and printing."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated, Any, NoReturn

import httpx
import typer

from workly.client.api import ApiClient, ClientError
from workly.client.inputs import InputError

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
Cursor = Annotated[str | None, typer.Option(help="next page: the cursor a previous page printed")]

# Where the commands' requests go: None is the network, as the command line always has it. Tests
# that run a command in-process set a transport into an app for the length of that one run.
TRANSPORT: ContextVar[httpx.BaseTransport | None] = ContextVar("workly_client_transport", default=None)


def ask(server: str, token: str | None, call: Callable[[ApiClient], dict[str, Any]]) -> dict[str, Any]:
    try:
        with ApiClient(server, token, TRANSPORT.get()) as api:
            return call(api)
    except InputError as exc:
        usage_error(str(exc))
    except ClientError as exc:
        typer.echo(f"workly: {exc}", err=True)
        raise typer.Exit(code=1) from None


def show(found: dict[str, Any], as_json: bool, as_text: Callable[[dict[str, Any]], str]) -> None:
    typer.echo(json.dumps(found, indent=2) if as_json else as_text(found))


def show_page(page: dict[str, Any], items: str, as_json: bool, as_text: Callable[[Any], str]) -> None:
    """A list page: its rows (or 'no <items>'), and the cursor of the next page if there is one."""
    if as_json:
        typer.echo(json.dumps(page, indent=2))
        return
    typer.echo(as_text(page[items]) if page[items] else f"no {items}")
    if page["next_cursor"]:
        typer.echo(f"more: --cursor {page['next_cursor']}")


def usage_error(reason: str) -> NoReturn:
    typer.echo(f"workly: {reason}", err=True)
    raise typer.Exit(code=2)


# A queue's or endpoint's --retention (parsed by inputs.parse_retention).
KeptFor = Annotated[
    str | None,
    typer.Option(
        "--retention", help="how long its finished tasks are kept: 7d, 12h; forever; or none (the settings)"
    ),
]
