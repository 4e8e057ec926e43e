"""Task identifiers: ``task_`` + a ULID (time-ordered, 128 bits, Crockford base32).

The id is the ``webhook-id`` receivers deduplicate on, so it must be unique across
processes and installs; ordering inside a queue comes from the database sequence,
not from this id.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


# Two digits at a time from a table: a digit at a time (or base64.b32encode, pure Python
# on 3.11) cost 5-6 µs an id, a quarter of building a task.
_PAIRS = [first + second for first in _ALPHABET for second in _ALPHABET]
_SHIFTS = tuple(range(120, -10, -10))


def _base32(value: int) -> str:
    """The 26 base32 digits of a 128-bit value, most significant first (a ULID's text)."""
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


def new_task_id(now_ms: int | None = None) -> str:
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    randomness = int.from_bytes(os.urandom(10), "big")
    return "task_" + _base32(((millis & (2**48 - 1)) << 80) | randomness)


def new_id(prefix: str, now_ms: int | None = None) -> str:
    """``<prefix>_`` + a ULID, as task ids are made: ``ep``, ``evt``."""
    return prefix + new_task_id(now_ms).removeprefix("task")
