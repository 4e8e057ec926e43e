"""The server commands: dev, serve, migrate, secret.

Each checks what it can before it starts (workly/cli/checks.py): settings, secrets, the
outbound files, the database (migrated once, before any worker), the port (bound before
anything says it listens), and prints what it runs with; then uvicorn serves, in this process
or in workers under a supervisor (workly/cli/serving.py, which says what signals do)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from workly.cli.checks import (
    BAD_SETTING,
    check_outbound,
    check_secrets,
    configure_logging,
    fail,
    listening_socket,
    load_settings,
    migrate_first,
    only_loopback,
)
from workly.database_url import is_sqlite, redacted
from workly.signing import generate_key_pair, generate_secret, public_key_of
from workly.ssrf_guard import LOOPBACK

if TYPE_CHECKING:
    from workly.config import Settings

DEV_OUTBOUND_ALLOW = " ".join(map(str, LOOPBACK))  # workly dev delivers to local receivers
_MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def register(app: typer.Typer) -> None:
    app.command()(dev)
    app.command()(serve)
    app.command()(migrate)
    app.command()(secret)


def _dev_secret(db: Path) -> str:
    """WORKLY_SIGNING_SECRET, else the one stored beside the database, else a new one."""
    from_env = os.environ.get("WORKLY_SIGNING_SECRET")
    if from_env:
        return from_env
    secret_file = db.with_name(db.name + ".signing-secret")
    if secret_file.exists():
        stored = secret_file.read_text().strip()
        if not stored:
            fail(f"{secret_file} is empty: delete it and a new secret is generated")
        return stored
    made = generate_secret()
    try:
        secret_file.parent.mkdir(parents=True, exist_ok=True)
        secret_file.touch(mode=0o600)
        secret_file.write_text(made + "\n")
    except OSError as exc:
        fail(f"cannot write {secret_file}: {exc.strerror or exc} (--db: a file in a directory you can write)")
    return made


def _refuse_short_tokens(settings: Settings) -> None:
    short = settings.short_tokens()
    if short:
        from workly.config import MIN_TOKEN_LENGTH  # loaded with the settings already

        fail(
            f"WORKLY_API_TOKENS: token(s) {short} are under {MIN_TOKEN_LENGTH} characters, easy to guess "
            "(`openssl rand -hex 32` makes one)"
        )


def dev(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port to listen on")] = 7337,
    db: Annotated[Path, typer.Option(help="SQLite database file")] = Path("./workly.db"),
) -> None:
    """Run on SQLite in one process: for development and small installs."""
    db = db.resolve()
    settings = load_settings(database_url=f"sqlite:///{db}")  # refuse bad settings before writing files
    if not only_loopback(host):  # the network can reach it: tokens required, as serve's
        if not settings.tokens():
            fail(
                f"--host {host} would serve the API and the dashboard without authentication to every "
                "machine that can reach this one: set WORKLY_API_TOKENS, or listen on 127.0.0.1"
            )
        _refuse_short_tokens(settings)
    sock = listening_socket(host, port)  # and a port it cannot have: before the database is made
    outbound = DEV_OUTBOUND_ALLOW if settings.outbound_allow is None else settings.outbound_allow
    settings = settings.model_copy(update={"signing_secret": _dev_secret(db), "outbound_allow": outbound})
    check_secrets(settings)
    check_outbound(settings)
    configure_logging(settings)
    migrate_first(settings)
    say = _banner("dev")
    say(f"database {db}")
    current = settings.signing_secrets()[0]
    if current.startswith("whsk_"):  # the receivers need the public half, not the key
        say(f"signing key {current} (ed25519: keep it here)")
        say(f"receivers verify with its public key {public_key_of(current)}")
    else:
        say(f"signing secret {current}")
    if settings.tokens():
        say(f"API tokens required ({len(settings.tokens())} from WORKLY_API_TOKENS)")
    else:
        say("no API authentication (development mode; set WORKLY_API_TOKENS to require one)")
    _say_outbound(say, settings)
    say(f"listening on http://{_shown(host)}:{port}  (API docs at /docs, dashboard at /ui)")
    # One process: its metrics need no shared files, and a directory left in the
    # environment by some earlier `workly serve` setup must not break the start.
    os.environ.pop(_MULTIPROC_ENV, None)
    _run(settings, sock, anonymous=not settings.tokens())


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "0.0.0.0",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port to listen on")] = 7337,
    workers: Annotated[int, typer.Option(min=1, help="processes, each with API and dispatcher")] = 1,
) -> None:
    """Run in production: needs WORKLY_DATABASE_URL, WORKLY_SIGNING_SECRET and WORKLY_API_TOKENS."""
    settings = load_settings()
    required = (
        (settings.database_url, "WORKLY_DATABASE_URL (postgresql://user@host/db or sqlite:///path)"),
        (settings.signing_secrets(), "WORKLY_SIGNING_SECRET (whsec_<base64>; `workly secret` prints one)"),
        (settings.tokens(), "WORKLY_API_TOKENS (bearer tokens: long random strings, `openssl rand -hex 32`)"),
    )
    missing = [reason for value, reason in required if not value]
    if missing:
        fail(f"not set: {'; '.join(missing)}")
    _refuse_short_tokens(settings)
    assert settings.database_url is not None
    check_secrets(settings)
    check_outbound(settings)
    if is_sqlite(settings.database_url) and workers > 1:
        fail("SQLite has a single writer: run one process (--workers 1) or use PostgreSQL")
    configure_logging(settings)
    migrate_first(settings)
    sock = listening_socket(host, port)
    own_metrics_dir = _shared_metrics(workers)
    say = _banner("serve")
    where = "" if is_sqlite(settings.database_url) else f" (schema {settings.database_schema})"
    say(f"database {redacted(settings.database_url)}{where}")
    say(f"{workers} worker processes, each with the API and a dispatcher" if workers > 1
        else "1 worker process, with the API and a dispatcher")  # fmt: skip
    say(f"API tokens required ({len(settings.tokens())} from WORKLY_API_TOKENS)")
    say(f"signing with {len(settings.signing_secrets())} key(s) from WORKLY_SIGNING_SECRET")
    _say_outbound(say, settings)
    say(f"listening on http://{_shown(host)}:{port}  (API docs at /docs, dashboard at /ui)")
    status = 0
    try:
        if workers == 1:
            _run(settings, sock)
        else:
            from workly.cli.serving import supervise

            # The workers serve the socket bound here: nothing can take the port in between.
            status = supervise(sock, workers)
    finally:  # every worker has ended by now
        if own_metrics_dir is not None:
            del os.environ[_MULTIPROC_ENV]
            shutil.rmtree(own_metrics_dir, ignore_errors=True)
    if status:
        raise typer.Exit(code=status)


def _run(settings: Settings, sock: socket.socket, *, anonymous: bool = False) -> None:
    """Serve the app over ``settings`` on the bound socket, in this process."""
    from workly.app import create_app
    from workly.cli.serving import serve_app
    from workly.service import Service

    service = Service(settings)
    serve_app(create_app(service, anonymous=anonymous), service, sock, settings)


def _shared_metrics(workers: int) -> str | None:
    """Several workers share their metrics through prometheus_client's multiprocess mode
    (workly/metrics.py). prometheus_client reads the variable when a process imports it, so
    it goes into the environment here, before the supervisor spawns the workers; and the directory
    must start empty. (Not imported from workly.metrics: that would import prometheus_client
    into this process too.) The directory made here, to remove at exit, if any."""
    metrics_dir = os.environ.get(_MULTIPROC_ENV)
    if metrics_dir is not None:  # the user's: wiped of an earlier run's files, kept at exit
        if not metrics_dir or not os.path.isdir(metrics_dir):
            fail(f"{_MULTIPROC_ENV}={metrics_dir!r} is not a directory")
        try:
            for stale in Path(metrics_dir).glob("*.db"):
                stale.unlink()
        except OSError as exc:
            fail(f"cannot empty {_MULTIPROC_ENV}={metrics_dir}: {exc}")
        return None
    if workers == 1:
        return None
    own = tempfile.mkdtemp(prefix="workly-metrics-")  # mode 0700, this user's
    os.environ[_MULTIPROC_ENV] = own
    return own


def _banner(command: str) -> Callable[[str], None]:
    return lambda line: typer.echo(f"workly {command}: {line}")


def _say_outbound(say: Callable[[str], None], settings: Settings) -> None:
    allowed = settings.outbound_allow
    if allowed:
        say(f"deliveries may reach public addresses and {allowed}")
    else:
        say("deliveries may reach public addresses only (WORKLY_OUTBOUND_ALLOW opens others)")
    if settings.proxy() is not None:
        say(f"deliveries go through the proxy {settings.proxy()}")


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def migrate() -> None:
    """Apply pending migrations to WORKLY_DATABASE_URL and exit."""
    settings = load_settings()
    if not settings.database_url:
        fail("WORKLY_DATABASE_URL is not set")
    applied, version = migrate_first(settings, unreachable=BAD_SETTING, refusal="cannot migrate")
    where = "" if is_sqlite(settings.database_url) else f" in schema {settings.database_schema}"
    typer.echo(
        f"applied {applied}; schema version {version}{where}"
        if applied
        else f"up to date (version {version}{where})"
    )


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
