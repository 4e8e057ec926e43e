"""The Idempotency-Key header: what it may hold, and how it meets the body's idempotency_key.

One rule for the route and the fast enqueue path: a key is 1-255 printable characters; the
header and the body's field may both be given only when they agree.
"""

from __future__ import annotations

import re

from workly.api.schemas import TaskIn

IDEMPOTENCY_KEY_PATTERN = r"[^\x00-\x1f\x7f]+"  # a regex: fullmatch it, or anchor it where used
MAX_IDEMPOTENCY_KEY = 255
_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


class DifferentIdempotencyKeys(ValueError):
    def __init__(self) -> None:
        super().__init__("The Idempotency-Key header and the idempotency_key field differ.")


def is_idempotency_key(value: str) -> bool:
    return len(value) <= MAX_IDEMPOTENCY_KEY and _KEY.fullmatch(value) is not None


def idempotency_key_of(task: TaskIn, header: str | None) -> str | None:
    """The header's key, once it does not contradict the body's (whose key, if any, the
    stored task carries)."""
    if header and task.idempotency_key and header != task.idempotency_key:
        raise DifferentIdempotencyKeys
    return header
