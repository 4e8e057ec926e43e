"""The ``workly`` command: dev, serve, migrate, secret; and the client commands (workly/client:
tasks and queues in commands.py, endpoints and events in webhooks.py, schedules in schedules.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from workly import logs
from workly.client import commands as client_commands
from workly.client import schedules as schedule_commands
from workly.client import webhooks as webhook_commands
from workly.database_url import redacted
from workly.errors import ConfigError
from workly.outbound import LOOPBACK
from workly.signing import Signer, generate_key_pair, generate_secret, public_key_of

if TYPE_CHECKING:
    from workly.config import Settings

# The server's modules (uvicorn, the database drivers, pydantic-settings) are imported by the
# server commands that use them, so the client commands (`workly tasks`, …) start quickly.

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Workly: HTTP delivery service.")
APP_FACTORY = "workly.app:app_from_env"
DEV_OUTBOUND_ALLOW = " ".join(map(str, LOOPBACK))  # workly dev delivers to local receivers
client_commands.register(app)
webhook_commands.register(app)
schedule_commands.register(app)


def _fail(reason: str) -> NoReturn:
    typer.echo(f"workly: {reason}", err=True)
    raise typer.Exit(code=2)


def _settings(**overrides: object) -> Settings:
    from pydantic import ValidationError

    from workly.config import Settings

    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        if not first["loc"]:  # a rule across settings: its message names them
            _fail(f"invalid configuration: {first['ctx']['error']}")
        _fail(f"invalid WORKLY_{str(first['loc'][0]).upper()}: {first['msg']}")


def _configure_logging(settings: Settings) -> None:
    logs.configure(settings.log_level, settings.log_format)


def _dev_secret(db: Path) -> str:
    """WORKLY_SIGNING_SECRET, else the one stored beside the database, else a new one."""
    from_env = os.environ.get("WORKLY_SIGNING_SECRET")
    if from_env:
        return from_env
    secret_file = db.with_name(db.name + ".signing-secret")
    if secret_file.exists():
        stored = secret_file.read_text().strip()
        if not stored:
            _fail(f"{secret_file} is empty: delete it and a new secret is generated")
        return stored
    secret = generate_secret()
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    secret_file.touch(mode=0o600)
    secret_file.write_text(secret + "\n")
    return secret


@app.command()
def dev(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 7337,
    db: Annotated[Path, typer.Option(help="SQLite database file")] = Path("./workly.db"),
) -> None:
    """Run on SQLite in one process: for development and small installs."""
    db = db.resolve()
    settings = _settings(database_url=f"sqlite:///{db}")  # refuse bad settings before writing files
    outbound = DEV_OUTBOUND_ALLOW if settings.outbound_allow is None else settings.outbound_allow
    settings = settings.model_copy(update={"signing_secret": _dev_secret(db), "outbound_allow": outbound})
    _check_secrets(settings)
    _check_outbound(settings)
    _configure_logging(settings)
    typer.echo(f"workly dev: database {db}")
    current = settings.signing_secrets()[0]
    if current.startswith("whsk_"):  # the receivers need the public half, not the key
        typer.echo(f"workly dev: signing key {current} (ed25519: keep it here)")
        typer.echo(f"workly dev: receivers verify with its public key {public_key_of(current)}")
    else:
        typer.echo(f"workly dev: signing secret {current}")
    if settings.tokens():
        typer.echo(f"workly dev: API tokens required ({len(settings.tokens())} from WORKLY_API_TOKENS)")
    else:
        typer.echo(
            "workly dev: no API authentication (development mode; set WORKLY_API_TOKENS to require one)"
        )
    typer.echo(f"workly dev: deliveries may reach public addresses and {outbound or 'nothing else'}")
    if settings.proxy() is not None:
        typer.echo(f"workly dev: deliveries go through the proxy {settings.proxy()}")
    typer.echo(f"workly dev: listening on http://{host}:{port}  (API docs at /docs, dashboard at /ui)")
    # One process: its metrics need no shared files, and a directory left in the
    # environment by some earlier `workly serve` setup must not break the start.
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    import uvicorn

    from workly.app import create_app
    from workly.service import Service

    app = create_app(Service(settings), anonymous=not settings.tokens())
    uvicorn.run(app, host=host, port=port, log_level=settings.log_level, access_log=False, log_config=None)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="port to listen on")] = 7337,
    workers: Annotated[int, typer.Option(min=1, help="processes, each with API and dispatcher")] = 1,
) -> None:
    """Run in production: needs WORKLY_DATABASE_URL, WORKLY_SIGNING_SECRET and WORKLY_API_TOKENS."""
    settings = _settings()
    if not settings.database_url:
        _fail("WORKLY_DATABASE_URL is not set (postgresql://user@host/db or sqlite:///path)")
    if not settings.signing_secrets():
        _fail("WORKLY_SIGNING_SECRET is not set (whsec_<base64>; `workly secret` prints one)")
    _check_secrets(settings)
    _check_outbound(settings)
    if not settings.tokens():
        _fail(
            "WORKLY_API_TOKENS is not set: the API needs at least one bearer token "
            "(any long random string, e.g. from `openssl rand -hex 32`)"
        )
    if settings.database_url.startswith("sqlite:") and workers > 1:
        _fail("SQLite has a single writer: run one process (--workers 1) or use PostgreSQL")
    if not settings.database_url.startswith("sqlite:"):
        _refuse_an_install_elsewhere(settings)
    # Several workers share their metrics through prometheus_client's multiprocess mode
    # (workly/metrics.py). prometheus_client reads the variable when a process imports it,
    # so it goes into the environment here, before uvicorn spawns the workers; and the
    # directory must start empty. Not imported from workly.metrics: that would import
    # prometheus_client into this process too.
    multiproc_env = "PROMETHEUS_MULTIPROC_DIR"
    metrics_dir = os.environ.get(multiproc_env)
    own_metrics_dir = None
    if metrics_dir is not None:  # the user's: wiped of an earlier run's files, kept at exit
        if not metrics_dir or not os.path.isdir(metrics_dir):
            _fail(f"{multiproc_env}={metrics_dir!r} is not a directory")
        try:
            for stale in Path(metrics_dir).glob("*.db"):
                stale.unlink()
        except OSError as exc:
            _fail(f"cannot empty {multiproc_env}={metrics_dir}: {exc}")
    elif workers > 1:
        own_metrics_dir = tempfile.mkdtemp(prefix="workly-metrics-")  # mode 0700, this user's
        os.environ[multiproc_env] = own_metrics_dir
    _configure_logging(settings)
    import uvicorn

    try:
        uvicorn.run(
            APP_FACTORY,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=settings.log_level,
            access_log=False,
            log_config=None,  # uvicorn's loggers propagate to Workly's handler (text or JSON)
        )
    finally:  # uvicorn has joined its workers by now
        if own_metrics_dir is not None:
            del os.environ[multiproc_env]
            shutil.rmtree(own_metrics_dir, ignore_errors=True)


def _refuse_an_install_elsewhere(settings: Settings) -> None:
    """Migrate before the workers start, so that a database whose Workly install is in another
    schema than the configured one is refused on one line (each worker would fail with a
    traceback)."""
    from workly.errors import ConfigError, WorklyError
    from workly.service import migrate_database

    try:
        asyncio.run(migrate_database(settings))
    except ConfigError as exc:
        _fail(str(exc))
    except WorklyError:
        pass  # the database cannot be reached now: the workers say so as they start


@app.command()
def migrate() -> None:
    """Apply pending migrations to WORKLY_DATABASE_URL and exit."""
    from workly.database_url import is_sqlite
    from workly.errors import ConfigError, StorageError
    from workly.service import migrate_database

    settings = _settings()
    if not settings.database_url:
        _fail("WORKLY_DATABASE_URL is not set")
    try:
        applied, version = asyncio.run(migrate_database(settings))
    except ConfigError as exc:
        _fail(str(exc))
    except StorageError as exc:
        cause = exc.__cause__ or exc
        _fail(f"cannot migrate {redacted(settings.database_url)}: {type(cause).__name__}: {cause}")
    where = "" if is_sqlite(settings.database_url) else f" in schema {settings.database_schema}"
    typer.echo(
        f"applied {applied}; schema version {version}{where}"
        if applied
        else f"up to date (version {version}{where})"
    )


@app.command()
def secret(
    ed25519: Annotated[
        bool, typer.Option("--ed25519", help="an ed25519 key pair (v1a signatures) instead of an HMAC secret")
    ] = False,
) -> None:
    """Print a new signing secret (whsec_…), or with --ed25519 a private key (whsk_…) and its
    public key (whpk_…), each on its own line."""
    if ed25519:
        private, public = generate_key_pair()
        typer.echo(private)
        typer.echo(public)
    else:
        typer.echo(generate_secret())


def _check_secrets(settings: Settings) -> None:
    try:
        Signer(settings.signing_secrets())
    except ConfigError as exc:
        _fail(f"WORKLY_SIGNING_SECRET: {exc}")


def _check_outbound(settings: Settings) -> None:
    """The CA, client certificate and key files, before any worker starts (one line, exit 2)."""
    from workly.service import outbound_client

    try:
        outbound_client(settings)
    except ConfigError as exc:
        _fail(str(exc))


def main() -> None:
    app()
