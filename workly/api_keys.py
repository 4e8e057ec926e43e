"""API keys stored in the database (docs/security.md).

A key is ``wk_`` + 43 characters of base64url: 256 random bits. Only its SHA-256 digest is
stored (a key is random enough that no slow hash is needed: nothing can be guessed from
the digest), so the key itself is shown once, when it is made.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from workly.access import Principal, Role

KEY_PREFIX = "wk_"
KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class ApiKeySpec:
    name: str
    role: Role
    tenant: str | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str  # key_…
    spec: ApiKeySpec
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    def usable_at(self, now: datetime) -> bool:
        expires = self.spec.expires_at
        return self.revoked_at is None and (expires is None or now < expires)

    def principal(self) -> Principal:
        spec = self.spec
        return Principal(type="key", role=spec.role, tenant=spec.tenant, key_id=self.id, name=spec.name)


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def key_digest(key: str | bytes) -> str:
    """What is stored of a key, and what it is looked up by."""
    raw = key.encode() if isinstance(key, str) else key
    return hashlib.sha256(raw).hexdigest()


def looks_like_key(offered: bytes) -> bool:
    return offered.startswith(KEY_PREFIX.encode()) and len(offered) <= 128
