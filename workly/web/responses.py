"""JSON answers, rendered by orjson.

The API answers every request with JSON; Starlette's ``JSONResponse`` renders it with the
json module, which was a fifth of building the enqueue's answer. orjson writes the same
compact UTF-8 JSON. What it cannot write (an integer beyond 64 bits, a key that is not a
string) goes to the json module as before, and so fails as before where that fails too.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse as _StarletteJSON


class JSONResponse(_StarletteJSON):
    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            return super().render(content)
