"""A task's body bytes as its JSON shows them: ``body`` (re-encoded as Workly stores it) or
``body_base64`` — the API answers with one of the two."""

from __future__ import annotations

from typing import Any

from workly.body import encode_body


def stored_body(task: dict[str, Any]) -> bytes:
    return encode_body(task["headers"], task["body"], task["body_base64"])[1]
