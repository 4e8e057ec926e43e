"""Checking an endpoint's content filter (the language is workly/event_filter.py's): what a
malformed one is told (a ValueError naming where), the limits, and the normal form a filter is
kept in (floats as the exact decimals they print as)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, Final

ROOTS: Final = ("type", "tenant", "labels", "payload")
ORDERING: Final = ("$gt", "$gte", "$lt", "$lte")
OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
MAX_DEPTH: Final = 6
MAX_CONDITIONS: Final = 64
MAX_FILTERS: Final = 64
MAX_ITEMS: Final = 100
MAX_STRING: Final = 1024
MAX_SEGMENT: Final = 64
MAX_SEGMENTS: Final = 8
MAX_DIGIT_SEGMENTS: Final = 3
MAX_TEXT: Final = 8 * 1024
# Longer digit segments are keys only: jsonpath subscripts are 32-bit, and no jsonb array
# has a billion elements, so both sides find nothing there as an index anyway.
_INDEX_DIGITS: Final = 9
_INT_LIMIT: Final = 10**308


def check_filter(value: object) -> dict[str, Any]:
    """The filter normalized (floats as ``Decimal(repr(f))``), or ValueError naming where."""
    normalized = _check(value, "filter", 0, [0, 0])
    size = len(json_text(normalized).encode())
    if size > MAX_TEXT:
        raise ValueError(f"filter: longer than 8 KiB as compact JSON ({size} bytes)")
    return normalized


def _check(value: object, where: str, depth: int, counts: list[int]) -> dict[str, Any]:
    """counts: conditions and nested filters so far, in the whole filter."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: a filter must be a JSON object")
    normalized: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValueError(f"{where}: keys must be strings")
        if key in ("$and", "$or"):
            if not isinstance(item, list) or not item:
                raise ValueError(f"{where}: {key} takes a non-empty list of filters")
            items = enumerate(item)
            normalized[key] = [_nested(each, f"{where}.{key}[{i}]", depth, counts) for i, each in items]
        elif key == "$not":
            normalized[key] = _nested(item, f"{where}.$not", depth, counts)
        elif key.startswith("$"):
            raise ValueError(f"{where}: unknown operator {_shown(key)} (beside paths: $and, $or, $not)")
        else:
            counts[0] += 1
            if counts[0] > MAX_CONDITIONS:
                raise ValueError(f"{where}: more than {MAX_CONDITIONS} conditions in the filter")
            here = f"{where}.{_shown(key)}"
            _check_path(key, here)
            normalized[key] = _check_condition(item, here)
    return normalized


def _nested(value: object, where: str, depth: int, counts: list[int]) -> dict[str, Any]:
    if depth >= MAX_DEPTH:
        raise ValueError(f"{where}: $and, $or and $not nest at most {MAX_DEPTH} levels deep")
    counts[1] += 1
    if counts[1] > MAX_FILTERS:
        raise ValueError(f"{where}: more than {MAX_FILTERS} nested filters in the filter")
    return _check(value, where, depth + 1, counts)


def _check_path(path: str, where: str) -> None:
    segments = path.split(".")
    if len(segments) > MAX_SEGMENTS:
        raise ValueError(f"{where}: a path has at most {MAX_SEGMENTS} segments")
    if "" in segments:
        raise ValueError(f"{where}: a path's segments cannot be empty (a key holding '.' cannot be reached)")
    if segments[0] not in ROOTS:
        raise ValueError(f"{where}: a path starts with type, tenant, labels or payload")
    for segment in segments:
        if len(segment) > MAX_SEGMENT:
            raise ValueError(f"{where}: a path segment is at most {MAX_SEGMENT} characters")
        _check_string(segment, where)
    if sum(array_index(segment) is not None for segment in segments) > MAX_DIGIT_SEGMENTS:
        raise ValueError(f"{where}: a path has at most {MAX_DIGIT_SEGMENTS} segments of digits only")


def _check_condition(value: object, where: str) -> Any:
    if isinstance(value, list):
        raise ValueError(f"{where}: arrays cannot be compared (use $in for one of several values)")
    if not isinstance(value, dict):
        return _scalar(value, where)
    if not value:
        raise ValueError(f"{where}: an operator object cannot be empty")
    named = [key for key in value if isinstance(key, str) and key.startswith("$")]
    if not named:
        raise ValueError(f"{where}: objects cannot be compared (give a scalar or operators such as $eq)")
    if len(named) != len(value):
        raise ValueError(f"{where}: an operator object cannot mix operators and keys")
    return {op: _check_operator(op, arg, where) for op, arg in value.items()}


def _check_operator(op: str, arg: object, where: str) -> Any:
    if op not in OPERATORS:
        raise ValueError(f"{where}: unknown operator {_shown(op)}")
    if op == "$exists":
        if not isinstance(arg, bool):
            raise ValueError(f"{where}: $exists takes true or false")
        return arg
    if op in ("$in", "$nin"):
        if not isinstance(arg, list) or not 0 < len(arg) <= MAX_ITEMS:
            raise ValueError(f"{where}: {op} takes a non-empty list of at most {MAX_ITEMS} scalars")
        return [_scalar(item, f"{where}.{op}[{i}]") for i, item in enumerate(arg)]
    if op in ORDERING and (isinstance(arg, bool) or not isinstance(arg, int | float | Decimal | str)):
        raise ValueError(f"{where}: {op} takes a number or a string")
    if isinstance(arg, dict | list):
        raise ValueError(f"{where}: {op} takes a scalar (a string, number, boolean or null)")
    return _scalar(arg, where)


def _scalar(value: object, where: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) >= _INT_LIMIT:
            raise ValueError(f"{where}: integers have at most 308 digits")
        return int(value)
    if isinstance(value, float | Decimal):
        if not (value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)):
            raise ValueError(f"{where}: NaN and Infinity are not JSON numbers")
        # A double's shortest decimal: what the client wrote, exactly, and what the JSON
        # answer gives back (filter_json); another Decimal would not survive that.
        number = Decimal(repr(float(value)))
        if isinstance(value, Decimal) and number != value:
            raise ValueError(f"{where}: a number with a fraction or exponent must be a double")
        return number
    if isinstance(value, str):
        _check_string(value, where)
        return str(value)  # a subclass (an enum's) would be no "string" to _typed
    if isinstance(value, dict | list):
        raise ValueError(f"{where}: arrays and objects cannot be compared")
    raise ValueError(f"{where}: {type(value).__name__} is not a JSON value")


def _check_string(value: str, where: str) -> None:
    if len(value) > MAX_STRING:
        raise ValueError(f"{where}: strings are at most {MAX_STRING} characters")
    if "\x00" in value:  # PostgreSQL's text cannot hold it, so no jsonb string does
        raise ValueError(f"{where}: strings cannot hold U+0000")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ValueError(f"{where}: strings must be valid Unicode (no lone surrogates)") from None


def _shown(key: str) -> str:
    return key if len(key) <= 80 else key[:77] + "..."


def array_index(segment: str) -> int | None:
    """The array index a segment also means: ASCII digits only (str.isdigit takes '²')."""
    if segment.isascii() and segment.isdigit() and len(segment) <= _INDEX_DIGITS:
        return int(segment)
    return None


def json_text(value: Any) -> str:
    """Compact JSON with Decimals written as they are (the json module would refuse them)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{dumps(key)}:{json_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(json_text(item) for item in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return dumps(value)


def dumps(value: Any) -> str:
    # Also a jsonpath literal: its escapes (\" \\ \n \uXXXX) are JSON's; the rest stays raw.
    return json.dumps(value, ensure_ascii=False)
