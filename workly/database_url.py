"""Reading WORKLY_DATABASE_URL: which backend, and the options Workly takes out of it.

Pure parsing, shared by the settings (which refuse a bad URL at start-up) and the storage
backends (which open it), so neither imports the other.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from workly.errors import ConfigError

SCHEMES = ("postgresql://", "postgres://", "sqlite:///")
DEFAULT_SCHEMA = "public"
# Lower case, so that it reads the same quoted or not (SELECT workly.enqueue_task(...));
# pg_ names are PostgreSQL's own.
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite:///")


def split_pool_size(url: str) -> tuple[str, int]:
    """Remove ``pool_max_conns`` from a PostgreSQL URL (asyncpg rejects it); return the
    URL and the pool size. Default: the CPU count, at least 4."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    size = max(4, os.cpu_count() or 1)
    kept = []
    for name, value in query:
        if name.lower() == "search_path" or (name == "options" and "search_path" in value.lower()):
            raise ConfigError(
                "the database URL sets a search_path: name Workly's schema with WORKLY_DATABASE_SCHEMA "
                "instead (every Workly connection sets its own search_path)"
            )
        if name == "pool_max_conns":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"pool_max_conns must be a positive integer, got {value!r}")
            size = int(value)
        else:
            kept.append((name, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), size


def check_schema_name(name: str) -> None:
    """A PostgreSQL schema Workly may live in (WORKLY_DATABASE_SCHEMA)."""
    if not _SCHEMA.fullmatch(name) or name.startswith("pg_"):
        raise ConfigError(
            f"WORKLY_DATABASE_SCHEMA {name!r} must be 1-63 lower-case letters, digits and underscores, "
            "not starting with a digit or pg_ (such as workly)"
        )


def sqlite_path(url: str) -> Path:
    if not is_sqlite(url):
        raise ConfigError(f"not a SQLite URL: {url!r} (expected sqlite:///path)")
    path = url.removeprefix("sqlite:///")
    if not path or path == ":memory:":
        raise ConfigError("SQLite needs a file path: sqlite:///./workly.db")
    return Path(path)


# Query parameters libpq and asyncpg take a secret from.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def redacted(url: str) -> str:
    """The URL without its password (in the address or as ``?password=``), for messages."""
    parts = original = urlsplit(url)
    if parts.password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(":" + parts.password + "@", ":***@"))
    if parts.query:
        query = [
            f"{name}=***" if name.lower() in _SECRET_PARAMETERS else f"{name}={value}" if sep else name
            for name, sep, value in (item.partition("=") for item in parts.query.split("&"))
        ]
        parts = parts._replace(query="&".join(query))
    return url if parts == original else urlunsplit(parts)  # as given: sqlite:/// keeps its slashes
