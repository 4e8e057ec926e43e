"""The dashboard's sessions (docs/security.md): a login with a token or an API key opens one,
kept server-side so that logging out ends it for good.

The cookie holds ``s1.`` + 256 random bits; only its SHA-256 digest is stored, with who
logged in: an API key's id, or for a token an HMAC of the token's digest keyed with the
cookie, which tells a process holding the cookie and the tokens which token it was, and a
reader of the database nothing it could test guesses of a token against (a token removed
from WORKLY_API_TOKENS ends the sessions it opened; a revoked or expired key, its own).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

SESSION_SECONDS = 12 * 3600
COOKIE_PREFIX = "s1."


@dataclass(frozen=True, slots=True)
class Session:
    id: str  # ses_…
    key_id: str | None  # logged in with this API key …
    token_mac: str | None  # … or with the token of this token_mac
    created_at: datetime
    expires_at: datetime
    ended_at: datetime | None

    def open_at(self, now: datetime) -> bool:
        return self.ended_at is None and now < self.expires_at


def new_cookie() -> str:
    return COOKIE_PREFIX + secrets.token_urlsafe(32)


def cookie_digest(cookie: str) -> str | None:
    """What a cookie is stored and found by; None for a value no login made."""
    if not cookie.startswith(COOKIE_PREFIX) or len(cookie) > 128 or not cookie.isascii():
        return None
    return hashlib.sha256(cookie.encode()).hexdigest()


def token_mac(cookie: str, token_digest: bytes) -> str:
    """What a session opened with a token keeps of it: HMAC-SHA256 of the token's SHA-256
    digest, keyed with the session's cookie (not stored)."""
    return hmac.new(cookie.encode(), token_digest, hashlib.sha256).hexdigest()
