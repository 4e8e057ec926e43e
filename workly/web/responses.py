"""JSON answers, rendered by orjson.

The API answers every request with JSON; Starlette's ``JSONResponse`` renders it with the
json module, which was a fifth of building the enqueue's answer. orjson writes compact UTF-8
JSON too, the same but for the spelling of some floats (``1e-7`` where json writes
``1e-07``: the same number). Whatever orjson would write that the json module refuses (a
datetime, a dataclass, a subclass of a built-in type, an integer beyond 64 bits, a key that is
not a string) goes to the json module as before, and so fails as before. NaN and Infinity
are the exception (orjson writes null): no answer carries them, since every float an answer
shows is checked on the way in (workly/body.py's parse_json, the request schemas' bounds).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse as _StarletteJSON

from workly.json_text import ONLY_JSON_TYPES, refuse


class JSONResponse(_StarletteJSON):
    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content, default=refuse, option=ONLY_JSON_TYPES)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            return super().render(content)
