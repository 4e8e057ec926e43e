"""Parsing what a user types on the command line into API input. Raise InputError."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


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


def read_data(text: str) -> Any:
    """The task body: JSON given inline, from a file (@path) or from standard input (@-)."""
    source = "the --data value"
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
        raise InputError(f"{source} is not JSON ({exc}); to send text, quote it as a JSON string") from None


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
