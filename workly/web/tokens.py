"""The API tokens, and the dashboard sessions they open.

Tokens are kept only as SHA-256 digests. Every check compares the offered value with every
token (constant time each, no early exit), so its duration tells nothing, not even the length.

A dashboard session cookie is ``v1.<issued>.<mac>``: the time the browser logged in, signed
(HMAC-SHA256) with the digest of the token it logged in with. It never holds the token, so a
leaked cookie does not open the API; it expires after ``SESSION_SECONDS``; every process
with the same tokens accepts it; and removing a token from the configuration ends every
session it opened.
"""

from __future__ import annotations

import hashlib
import hmac

SESSION_SECONDS = 12 * 3600
_CLOCK_SKEW = 60  # seconds a cookie may seem to come from the future (processes' clocks differ)


class TokenSet:
    def __init__(self, tokens: list[str]) -> None:
        self._digests = [hashlib.sha256(token.encode()).digest() for token in tokens]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def matches(self, offered: bytes) -> bool:
        return _any_equal(hashlib.sha256(offered).digest(), self._digests)

    def authorizes(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """``Authorization: Bearer <token>`` with one of the tokens."""
        header = next((value for name, value in headers if name == b"authorization"), None)
        return header is not None and header[:7].lower() == b"bearer " and self.matches(header[7:].strip())

    def session_for(self, offered: str, now: float) -> str | None:
        """A session cookie value for a token typed into the login form, if it is one."""
        digest = hashlib.sha256(offered.strip().encode()).digest()
        if not _any_equal(digest, self._digests):
            return None
        issued = str(int(now))
        return f"v1.{issued}.{_mac(digest, issued)}"

    def is_session(self, cookie: str, now: float) -> bool:
        version, _, rest = cookie.partition(".")
        issued, _, mac = rest.partition(".")
        if version != "v1" or not issued.isascii() or not issued.isdigit() or len(issued) > 12:
            return False
        if not -_CLOCK_SKEW <= now - int(issued) <= SESSION_SECONDS:
            return False
        expected = [_mac(digest, issued).encode() for digest in self._digests]
        return _any_equal(mac.encode(errors="replace"), expected)


def _mac(token_digest: bytes, issued: str) -> str:
    return hmac.new(
        token_digest, b"workly-dashboard-session:v1." + issued.encode(), hashlib.sha256
    ).hexdigest()


def _any_equal(offered: bytes, candidates: list[bytes]) -> bool:
    matched = False
    for candidate in candidates:  # no early exit: every candidate is compared
        matched |= hmac.compare_digest(offered, candidate)
    return matched
