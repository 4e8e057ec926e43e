"""The API tokens (WORKLY_API_TOKENS).

Tokens are kept only as SHA-256 digests. Every check compares the offered value with every
token (constant time each, no early exit), so its duration tells nothing, not even the length.
A dashboard session opened with a token keeps an HMAC of its digest (workly/sessions.py):
removing the token from the configuration ends every session it opened.
"""

from __future__ import annotations

import hashlib
import hmac

from workly.sessions import token_mac


class TokenSet:
    def __init__(self, tokens: list[str]) -> None:
        self._digests = [hashlib.sha256(token.encode()).digest() for token in tokens]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def matches(self, offered: bytes) -> bool:
        return _any_equal(hashlib.sha256(offered).digest(), self._digests)

    def digest_of(self, offered: str) -> bytes | None:
        """The SHA-256 digest of a token typed into the login form, if it is one (its session
        keeps an HMAC of it: workly/sessions.py)."""
        digest = hashlib.sha256(offered.strip().encode()).digest()
        return digest if _any_equal(digest, self._digests) else None

    def opened_session(self, cookie: str, mac: str) -> bool:
        """Whether one of the tokens opened the session of this cookie and token_mac (a token
        removed from the configuration no longer does)."""
        candidates = [token_mac(cookie, digest).encode() for digest in self._digests]
        return _any_equal(mac.encode(errors="replace"), candidates)


def _any_equal(offered: bytes, candidates: list[bytes]) -> bool:
    matched = False
    for candidate in candidates:  # no early exit: every candidate is compared
        matched |= hmac.compare_digest(offered, candidate)
    return matched
