"""The ``workly`` command: the server commands (server.py: dev, serve, migrate, secret) and the
client commands (workly/client: tasks and queues in commands.py, endpoints and events in
webhooks.py, schedules in schedules.py, tenants, keys and the audit log in access_commands.py,
the event catalogue, replay and test events in catalogue_commands.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from workly import __version__
from workly.cli import doctor, loadtest, secret_key, server
from workly.client import access_commands, catalogue_commands, lifecycle_commands, queue_commands
from workly.client import commands as client_commands
from workly.client import schedules as schedule_commands
from workly.client import webhooks as webhook_commands

# The server's modules (uvicorn, the database drivers, pydantic-settings) are imported by the
# server commands that use them, so the client commands (`workly tasks`, …) start quickly.

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Workly: HTTP delivery service.")


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"workly {__version__}")
        raise typer.Exit


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit"),
    ] = False,
) -> None:
    """Workly: HTTP delivery service."""


server.register(app)
client_commands.register(app)
queue_commands.register(app)
webhook_commands.register(app)
schedule_commands.register(app)
access_commands.register(app)
catalogue_commands.register(app)
lifecycle_commands.register(app)
loadtest.register(app)
doctor.register(app)
secret_key.register(app)


def main() -> None:
    app()
