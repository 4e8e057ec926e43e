"""Parsing what a user types on the command line into API input. Raise InputError."""

from __future__ import annotations

import json
import math
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
# RFC 3339's date-time; the offset is matched as optional only to say that it is missing.
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", re.IGNORECASE)
_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)  # the server keeps times in the years 1970-2999
_LATEST = datetime(3000, 1, 1, tzinfo=UTC)


class InputError(ValueError):
    pass


def parse_delay(text: str) -> float:
    """'5s', '250ms', '10m', '2h', '1d' or plain seconds ('30', '1.5') → seconds."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise InputError(f"{text!r} is not a duration: use e.g. 30s, 250ms, 10m, 2h, 1d")
    seconds = float(match.group(1)) * _SECONDS[match.group(2)]
    if not math.isfinite(seconds):
        raise InputError(f"{text!r} is too long")
    return seconds


def parse_retention(text: str) -> int | None:
    """A --retention: a duration (7d, 12h), 'forever' (0), or 'none' (null: the server's
    settings) → what the API's retention field takes."""
    if text.lower() == "none":
        return None
    if text.lower() == "forever":
        return 0
    return round(parse_delay(text))


def parse_when(text: str, now: datetime) -> str:
    """A point in time as RFC 3339 UTC ('2030-01-01T00:00:00Z'), from RFC 3339 with an offset,
    or from a duration back from ``now`` ('30s', '10m', '2h', '1d', as parse_delay reads it,
    but with its unit: a bare number could as well be a Unix timestamp, or a year)."""
    duration = _DURATION.fullmatch(text)
    if duration is not None and duration.group(2) is None:
        raise InputError(
            f"{text!r} has no unit: write a duration back from now with one (30s, 10m, 2h, 1d), "
            "or a time (RFC 3339, e.g. 2030-01-01T00:00:00Z)"
        )
    if duration is not None:
        when = _ago(text, now)
    elif _RFC3339.fullmatch(text.strip()):
        when = _rfc3339(text.strip())
    else:
        raise InputError(
            f"{text!r} is neither a time (RFC 3339, e.g. 2030-01-01T00:00:00Z) "
            "nor a duration back from now (30s, 10m, 2h, 1d)"
        )
    if not _EARLIEST <= when < _LATEST:
        raise InputError(f"{text!r} is outside the years 1970 to 2999")
    return when.isoformat().replace("+00:00", "Z")


def parse_time(text: str) -> str:
    """An RFC 3339 time with an offset ('2030-01-01T09:00:00+01:00'), as RFC 3339 UTC."""
    if not _RFC3339.fullmatch(text.strip()):
        raise InputError(f"{text!r} is not a time: use RFC 3339 with an offset, e.g. 2030-01-01T09:00:00Z")
    when = _rfc3339(text.strip())
    if not _EARLIEST <= when < _LATEST:
        raise InputError(f"{text!r} is outside the years 1970 to 2999")
    return when.isoformat().replace("+00:00", "Z")


def _rfc3339(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.upper())
    except ValueError:  # e.g. month 13
        raise InputError(f"{text!r} is not a valid time") from None
    if when.tzinfo is None:  # the server would not know which zone is meant
        raise InputError(f"{text!r} has no UTC offset: add Z (UTC) or one such as +02:00")
    try:
        return when.astimezone(UTC)
    except OverflowError:  # an offset that crosses year 1 or 9999
        raise InputError(f"{text!r} is outside the years 1970 to 2999") from None


def _ago(text: str, now: datetime) -> datetime:
    try:
        return now.astimezone(UTC) - timedelta(seconds=parse_delay(text))
    except (InputError, OverflowError):  # so many seconds that no date is that far back
        raise InputError(f"{text!r} is outside the years 1970 to 2999") from None


def read_data(text: str, option: str = "--data") -> Any:
    """JSON given inline, from a file (@path) or from standard input (@-): a task's body, a
    payload, a schema, a filter (``option`` names where it was given)."""
    source = f"the {option} value"
    if text.startswith("@"):
        name = text[1:]
        source = "standard input" if name == "-" else name
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {source}: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        hint = "; to send text, quote it as a JSON string" if option == "--data" else ""
        raise InputError(f"{source} is not JSON ({exc}){hint}") from None


def parse_pairs(entries: list[str], option: str) -> dict[str, str]:
    """'key=value' entries of a repeatable option → a dict."""
    found = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep or not key:
            raise InputError(f"{option} {entry!r}: write key=value")
        found[key] = value
    return found


def parse_headers(values: list[str]) -> dict[str, str]:
    """'Name: value' pairs (repeatable --header) → a dict; a repeated name is refused."""
    headers: dict[str, str] = {}
    for value in values:
        name, colon, content = value.partition(":")
        name = name.strip()
        if not colon or not name:
            raise InputError(f"{value!r} is not a header: use 'Name: value'")
        if name.lower() in (known.lower() for known in headers):
            raise InputError(f"header {name!r} is given twice")
        headers[name] = content.strip()
    return headers
