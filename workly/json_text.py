"""JSON text written and read by orjson, falling back to the json module.

The storage encodes a list of ids or a task's headers for nearly every statement it runs
(SQLite's ``json_each`` takes its lists as JSON text), and the json module's encoder was a
tenth of the SQLite writer thread's time under load (docs/performance.md); the API renders
its answers the same way (workly/web/responses.py). orjson writes the same values as
compact UTF-8 text. Whatever it would write that the json module refuses (a datetime, a
dataclass, a subclass of a built-in type) and whatever it refuses itself (a key that is
not a string, an integer beyond 64 bits, a lone surrogate) goes to the json module, and so
is written, or fails, as before.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import orjson

ONLY_JSON_TYPES = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def refuse(value: Any) -> NoReturn:
    """orjson's ``default`` for a passed-through type: refused, so the json module decides."""
    raise TypeError(f"{type(value).__name__} is not a JSON type")


def to_json(value: Any) -> str:
    try:
        return orjson.dumps(value, default=refuse, option=ONLY_JSON_TYPES).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value)


def from_json(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # e.g. an escaped lone surrogate, which json reads
        return json.loads(text)
