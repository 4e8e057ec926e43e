"""Task identifiers: ``task_`` + a ULID (time-ordered, 128 bits, Crockford base32).

The id is the ``webhook-id`` receivers deduplicate on, so it must be unique across
processes and installs; ordering inside a queue comes from the database sequence,
not from this id.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_task_id(now_ms: int | None = None) -> str:
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    randomness = int.from_bytes(os.urandom(10), "big")
    return "task_" + _base32((millis << 80) | randomness, 26)


def new_id(prefix: str, now_ms: int | None = None) -> str:
    """``<prefix>_`` + a ULID, as task ids are made: ``ep``, ``evt``."""
    return prefix + new_task_id(now_ms).removeprefix("task")
