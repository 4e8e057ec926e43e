"""`workly secret-key new|reseal`: the key signing secrets are stored encrypted with
(WORKLY_SECRET_KEY, workly/secret_box.py), and re-encrypting them after a rotation."""

from __future__ import annotations

import asyncio
import base64
import os

import typer

from workly.cli.checks import fail, load_settings, migrate_first

app = typer.Typer(
    help="The key signing secrets are stored encrypted with (WORKLY_SECRET_KEY).", no_args_is_help=True
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="secret-key")


@app.command("new")
def new() -> None:
    """Print a new WORKLY_SECRET_KEY: the base64 of 32 random bytes."""
    typer.echo(base64.b64encode(os.urandom(32)).decode())


@app.command("reseal")
def reseal() -> None:
    """Store every queue's and endpoint's signing secret encrypted with the first key of
    WORKLY_SECRET_KEY: run it after setting a key for the first time, or after putting a new
    key first (keep the old one after it until this has run)."""
    from workly.errors import ConfigError
    from workly.service import Service

    settings = load_settings()
    if not settings.database_url:
        fail("WORKLY_DATABASE_URL is not set")
    if not settings.secret_key:
        fail("WORKLY_SECRET_KEY is not set: there is no key to encrypt with")
    migrate_first(settings)
    try:
        service = Service(settings.model_copy(update={"dispatch": False}))
    except ConfigError as exc:
        fail(str(exc))

    async def run() -> int:
        async with service.running():
            return await service.queues.reseal_secrets()

    try:
        resealed = asyncio.run(run())
    except ConfigError as exc:
        fail(str(exc))
    typer.echo(f"resealed {resealed} signing secret(s) with the first key of WORKLY_SECRET_KEY")
