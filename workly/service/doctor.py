"""`workly doctor`: what a server started with these settings would meet, and what to fix.

Each check gives findings: ``ok`` (said so it is plain what was checked), ``warn`` (it
runs, but an operator should know) or ``fail`` (`workly serve` would refuse, or would not
work). Nothing is changed: migrations are counted, not applied.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from workly.config import MIN_TOKEN_LENGTH, Settings
from workly.database_url import is_sqlite, redacted, sqlite_path
from workly.errors import ConfigError, StorageError
from workly.signing import PRIVATE_KEY_PREFIX, Signer
from workly.storage.contract import Database, Storage, UpkeepStore
from workly.storage.migrator import load_migrations

Level = Literal["ok", "warn", "fail"]
CLOCK_SKEW = 2.0  # seconds between this host and the database that leases start to feel


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    topic: str
    text: str


def check_settings(settings: Settings) -> list[Finding]:
    """What the settings themselves say (no database needed)."""
    return [*_signing(settings), *_tokens(settings), *_outbound(settings)]


def _signing(settings: Settings) -> list[Finding]:
    secrets = settings.signing_secrets()
    if not secrets:
        return [Finding("fail", "signing", "WORKLY_SIGNING_SECRET is not set: `workly secret` prints one")]
    try:
        Signer(secrets)
    except ConfigError as exc:
        return [Finding("fail", "signing", f"WORKLY_SIGNING_SECRET: {exc}")]
    keys = sum(secret.startswith(PRIVATE_KEY_PREFIX) for secret in secrets)
    kinds = f"{len(secrets) - keys} HMAC (v1), {keys} ed25519 (v1a)"
    rotation = "; the first signs as current, all sign (a rotation)" if len(secrets) > 1 else ""
    return [Finding("ok", "signing", f"{len(secrets)} key(s): {kinds}{rotation}")]


def _tokens(settings: Settings) -> list[Finding]:
    tokens = settings.tokens()
    if not tokens:
        return [
            Finding(
                "fail", "tokens", "WORKLY_API_TOKENS is not set: `workly serve` refuses to start without one "
                "(any long random string, e.g. from `openssl rand -hex 32`)",
            )
        ]  # fmt: skip
    short = settings.short_tokens()
    if short:
        return [
            Finding(
                "fail", "tokens", f"token(s) {short} of WORKLY_API_TOKENS are under {MIN_TOKEN_LENGTH} "
                "characters: easy to guess, and `workly serve` refuses them (`openssl rand -hex 32`)",
            )
        ]  # fmt: skip
    return [Finding("ok", "tokens", f"{len(tokens)} API token(s)")]


def _outbound(settings: Settings) -> list[Finding]:
    from workly.service.assembly import outbound_client

    allowed = settings.outbound_allow
    reach = f"public addresses and {allowed}" if allowed else "public addresses only (WORKLY_OUTBOUND_ALLOW)"
    found = [Finding("ok", "outbound", f"deliveries may reach {reach}")]
    if settings.proxy() is not None:
        found.append(Finding("ok", "outbound", f"deliveries go through the proxy {settings.proxy()}"))
    try:
        outbound_client(settings)
    except ConfigError as exc:
        found.append(Finding("fail", "outbound", str(exc)))
    return found


Opener = Callable[[Settings], Awaitable[Storage]]


# A SQLite file's header: its first 16 bytes, and at 18 and 19 the format versions, 2 in
# WAL mode (every database Workly made), 1 in the rollback-journal mode.
_SQLITE_MAGIC = b"SQLite format 3\x00"
_WAL = 2


def _sqlite_file(path: Path, shown: str) -> Finding | None:
    """What to say instead of opening ``path``, or None when it is one Workly made."""
    if not path.exists():
        return Finding("warn", "database", f"{shown} does not exist yet: the first server's start makes it")
    try:
        with path.open("rb") as file:
            header = file.read(20)
    except OSError as exc:
        return Finding("fail", "database", f"cannot read {shown}: {exc.strerror or exc}")
    if not header:
        return Finding("warn", "database", f"{shown} is empty: the first server's start makes it a database")
    if len(header) < 20 or not header.startswith(_SQLITE_MAGIC):
        return Finding("fail", "database", f"{shown} is not a SQLite database")
    if header[18] != _WAL or header[19] != _WAL:
        return Finding(
            "warn", "database", f"{shown} is a SQLite database Workly did not make (not in WAL mode): "
            "a server would add Workly's tables to it",
        )  # fmt: skip
    return None


async def check_database(
    settings: Settings, open_storage: Opener, now: datetime | None = None
) -> list[Finding]:
    """The database: reachable, migrated, vacuumed, and on the same time as this host."""
    if settings.database_url is None:
        return [
            Finding("fail", "database", "WORKLY_DATABASE_URL is not set (postgresql://… or sqlite:///path)")
        ]
    shown = redacted(settings.database_url)
    if is_sqlite(settings.database_url):
        # Opening a file that is not a Workly database would change it (WAL mode): say so instead.
        unopened = _sqlite_file(sqlite_path(settings.database_url), shown)
        if unopened is not None:
            return [unopened]
    try:
        storage = await open_storage(settings)
    except ConfigError as exc:
        return [Finding("fail", "database", str(exc))]
    except StorageError as exc:
        cause = exc.__cause__ or exc
        return [Finding("fail", "database", f"cannot reach {shown}: {type(cause).__name__}: {cause}")]
    try:
        await storage.database.check_install_location()
        state = await _database_state(storage.database, storage.upkeep, settings, now)
        return [Finding("ok", "database", f"{shown} answers"), *state]
    except ConfigError as exc:  # what serve would refuse to start with
        return [Finding("ok", "database", f"{shown} answers"), Finding("fail", "database", str(exc))]
    except StorageError as exc:
        return [Finding("fail", "database", f"{shown}: {exc}")]
    finally:
        await storage.close()


async def _counts(upkeep: UpkeepStore) -> Finding:
    miscounted = await upkeep.miscounted_queues()
    if not miscounted:
        return Finding("ok", "counts", "the kept task counts agree with the tasks")
    shown = ", ".join(miscounted[:10]) + (f" and {len(miscounted) - 10} more" if len(miscounted) > 10 else "")
    return Finding(
        "warn", "counts", f"the kept task counts of {shown} disagree with their tasks (a write that fired "
        "no trigger, such as a restore with triggers disabled): `workly recount` counts them again",
    )  # fmt: skip


async def recount(settings: Settings, open_storage: Opener) -> list[str]:
    """`workly recount`: count the tasks again into the kept counts; the queues that were wrong."""
    storage = await open_storage(settings)
    try:
        await storage.database.check_install_location()
        if await storage.database.schema_version() < _latest(settings):
            raise ConfigError("the database is not migrated: `workly migrate` first")
        miscounted = await storage.upkeep.miscounted_queues()
        await storage.upkeep.recount_tasks()
        return miscounted
    finally:
        await storage.close()


def _dialect(settings: Settings) -> Literal["postgres", "sqlite"]:
    assert settings.database_url is not None
    return "sqlite" if is_sqlite(settings.database_url) else "postgres"


def _latest(settings: Settings) -> int:
    return max(migration.version for migration in load_migrations(_dialect(settings)))


async def _database_state(
    database: Database, upkeep: UpkeepStore, settings: Settings, now: datetime | None
) -> list[Finding]:
    dialect = _dialect(settings)
    latest = _latest(settings)
    version = await database.schema_version()
    schema = f"schema version {version}" + (
        "" if dialect == "sqlite" else f" in schema {settings.database_schema}"
    )
    if version < latest:
        migrate = "`workly migrate` applies the rest (every server also does as it starts)"
        found = [Finding("warn", "database", f"{schema}, this Workly's is {latest}: {migrate}")]
    elif version > latest:
        found = [Finding("fail", "database", f"{schema} is newer than this Workly's ({latest}): upgrade it")]
    else:
        found = [Finding("ok", "database", f"{schema}, up to date"), await _counts(upkeep)]
    if await database.needs_vacuum():
        vacuum = "autovacuum is off: Workly vacuums its own tables every 10 s (WORKLY_VACUUM_INTERVAL)"
        found.append(Finding("warn", "database", f"{vacuum}, but autovacuum on is better"))
    database_now = await database.database_now()
    if database_now is not None:
        skew = abs((database_now - (now or datetime.now(UTC))).total_seconds())
        text = f"this host and the database differ by {skew:.2f} s"
        if skew > CLOCK_SKEW:
            found.append(
                Finding("warn", "clock", f"{text}: leases, schedules and rate limits read both (NTP)")
            )
        else:
            found.append(Finding("ok", "clock", text))
    return found
