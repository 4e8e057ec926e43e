"""How an enqueue's body becomes the exact bytes (and headers) that are stored and sent.

- ``body_base64``: those bytes, as given.
- ``body``: compact JSON, adding ``content-type: application/json`` unless the caller set
  a content type; a string with a non-JSON content type is sent as UTF-8 text.
- neither: no body.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any, NoReturn

from pydantic import JsonValue

from workly.media import header_value, is_json_type


def parse_json(data: str | bytes) -> Any:
    """JSON as an answer of Workly's can carry it again, unchanged: ValueError for NaN and
    Infinity (Python's parser takes them; JSON has no such numbers), a number too large for a
    float (1e400), a key given twice (the second would hide the first) and text no UTF-8
    answer can hold (a lone surrogate escaped as \\ud800)."""
    value = json.loads(data, parse_constant=_not_json, parse_float=_finite, object_pairs_hook=_no_repeats)
    # Only a \u escape can make a lone surrogate (the rest of the text is UTF-8), so only a
    # body with one is encoded again to find out; the enqueue's answer passes here.
    if (b"\\u" in data) if isinstance(data, bytes) else ("\\u" in data):
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise ValueError("a lone surrogate: not text an answer can carry") from None
    return value


def _not_json(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is too large for a float")
    return number


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a key given twice")
    return found


# json.dumps builds a new encoder for every call with options (4 µs of an enqueue's 15);
# this one is made once, with no state between calls.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def compact_json(value: Any) -> str:
    """``value`` as compact JSON text, non-ASCII as is; ValueError for NaN and Infinity."""
    return _COMPACT_JSON.encode(value)


def encode_body(
    headers: dict[str, str], body: JsonValue, body_base64: str | None
) -> tuple[dict[str, str], bytes]:
    """Raises ValueError for a body JSON cannot express (NaN, Infinity)."""
    if body_base64 is not None:
        return headers, base64.b64decode(body_base64)
    if body is None:
        return headers, b""
    content_type = header_value(headers, "content-type")
    if content_type is None:
        headers = {**headers, "content-type": "application/json"}
    elif isinstance(body, str) and not is_json_type(content_type):
        return headers, body.encode()
    try:
        encoded = compact_json(body)
    except ValueError:
        # Python's JSON parser takes NaN and Infinity; JSON does not, so no receiver could.
        raise ValueError("body must not contain NaN or Infinity (not JSON)") from None
    return headers, encoded.encode()
