"""What the server commands check before they start, each refusal one line and an exit code:
2 for a setting or an option to fix, 3 for a database that cannot be reached."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from typing import TYPE_CHECKING, NoReturn

import typer

from workly import logs
from workly.database_url import redacted
from workly.errors import ConfigError
from workly.signing import Signer

if TYPE_CHECKING:
    from workly.config import Settings

BAD_SETTING = 2
NO_DATABASE = 3
LISTEN_BACKLOG = 2048  # uvicorn's default


def fail(reason: str, code: int = BAD_SETTING) -> NoReturn:
    typer.echo(f"workly: {reason}", err=True)
    raise typer.Exit(code=code)


def load_settings(**overrides: object) -> Settings:
    """The settings from WORKLY_*; every invalid one named in one line."""
    from workly.config import Settings

    problems = invalid_settings(**overrides)
    if problems:
        fail("; ".join(problems))
    return Settings(**overrides)  # type: ignore[arg-type]


def invalid_settings(**overrides: object) -> list[str]:
    """What is wrong with the WORKLY_* settings, each named."""
    from pydantic import ValidationError

    from workly.config import Settings

    try:
        Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if not error["loc"]:  # a rule across settings: its message names them
                problems.append(f"invalid configuration: {error['ctx']['error']}")
            else:
                problems.append(f"invalid WORKLY_{str(error['loc'][0]).upper()}: {error['msg']}")
        return problems
    return []


def configure_logging(settings: Settings) -> None:
    logs.configure(settings.log_level, settings.log_format)


def check_secrets(settings: Settings) -> None:
    try:
        Signer(settings.signing_secrets())
    except ConfigError as exc:
        fail(f"WORKLY_SIGNING_SECRET: {exc}")


def check_outbound(settings: Settings) -> None:
    """The CA, client certificate and key files (one line, exit 2)."""
    from workly.service import outbound_client

    try:
        outbound_client(settings)
    except ConfigError as exc:
        fail(str(exc))


def migrate_first(
    settings: Settings, unreachable: int = NO_DATABASE, refusal: str = "cannot reach the database"
) -> tuple[list[int], int]:
    """Apply pending migrations before anything serves: a database that cannot be reached
    (exit ``unreachable``), or a Workly install elsewhere in it (exit 2), is one line
    instead of a traceback from each worker. The versions applied and the schema version."""
    from workly.errors import StorageError
    from workly.service import migrate_database

    assert settings.database_url is not None
    try:
        return asyncio.run(migrate_database(settings))
    except ConfigError as exc:
        fail(str(exc))
    except StorageError as exc:
        cause = exc.__cause__ or exc
        fail(
            f"{refusal} {redacted(settings.database_url)}: {type(cause).__name__}: {cause} ({_hint(cause)})",
            unreachable,
        )


def _hint(cause: BaseException) -> str:
    """What to check, by what the database said (the driver's error names it)."""
    # asyncpg's names: the server runs, but has no such database, or refuses the user
    if type(cause).__name__ == "InvalidCatalogNameError":
        return "the server answers: create the database (createdb), or fix its name in WORKLY_DATABASE_URL"
    if type(cause).__name__ in ("InvalidPasswordError", "InvalidAuthorizationSpecificationError"):
        return "the server answers: check the user and password in WORKLY_DATABASE_URL"
    return "is it running, and is WORKLY_DATABASE_URL right?"


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, before anything says it listens there."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} (--host takes this machine's address)")
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        # Listening from here on: a connection made once "listening on" is printed waits in
        # the backlog until the server accepts it, instead of being refused.
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        hint = {
            errno.EADDRINUSE: "something else listens there: stop it, or pick another --port",
            errno.EACCES: "ports below 1024 need privileges: pick another --port",
            errno.EADDRNOTAVAIL: "that address is not one of this machine's: check --host",
        }.get(exc.errno or 0, "check --host and --port")
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} ({hint})")
    sock.set_inheritable(True)  # the workers of --workers serve this very socket
    return sock


def only_loopback(host: str) -> bool:
    """Whether every address ``host`` stands for is a loopback one (127.0.0.0/8, ::1)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return False  # listening_socket says why it cannot listen there
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)
