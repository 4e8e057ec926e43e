"""The audit log: who changed what, and every refused request (docs/security.md).

Recorded: every state-changing request except enqueue and publish (those are recorded as
the tasks and events they store), and every request answered 401 or 403. Secrets and
bodies never reach it: ``redacted`` replaces them before an entry is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Outcome = Literal["ok", "denied", "error"]
REDACTED = "[redacted]"
# Fields whose values are never recorded: secrets, and what a receiver gets.
_SECRET_FIELDS = frozenset({"signing_secret", "key", "secret", "body", "body_base64", "payload",
                            "payload_base64"})  # fmt: skip
_HEADER_FIELDS = frozenset({"headers"})  # names kept, values redacted (they carry credentials)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: str  # aud_…
    at: datetime
    actor: dict[str, str | None]
    action: str  # "endpoint.update", "key.create", "request.unauthenticated", …
    target: str | None
    tenant: str | None
    outcome: Outcome
    status: int
    source_ip: str | None
    user_agent: str | None
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditFilter:
    actor: str | None = None  # a key id, or "token"
    action: str | None = None
    tenant: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def redacted(changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` as the audit log may keep them: secrets, bodies and header values replaced,
    and a URL without its query (``?token=…`` is a common way to pass a credential)."""
    kept: dict[str, Any] = {}
    for name, value in changes.items():
        if name in _SECRET_FIELDS and value is not None:
            kept[name] = REDACTED
        elif name in _HEADER_FIELDS and isinstance(value, Mapping):
            kept[name] = {header: REDACTED for header in value}
        elif (name == "url" or name.endswith("_url")) and isinstance(value, str) and "?" in value:
            kept[name] = value.split("?", 1)[0] + "?" + REDACTED
        else:
            kept[name] = value
    return kept
