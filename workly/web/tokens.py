"""The API tokens (WORKLY_API_TOKENS).

Tokens are kept only as SHA-256 digests. Every check compares the offered value with every
token (constant time each, no early exit), so its duration tells nothing, not even the length.
A dashboard session opened with a token keeps its digest (workly/sessions.py): removing the
token from the configuration ends every session it opened.
"""

from __future__ import annotations

import hashlib
import hmac


class TokenSet:
    def __init__(self, tokens: list[str]) -> None:
        self._digests = [hashlib.sha256(token.encode()).digest() for token in tokens]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def matches(self, offered: bytes) -> bool:
        return _any_equal(hashlib.sha256(offered).digest(), self._digests)

    def digest_of(self, offered: str) -> str | None:
        """The SHA-256 digest (hex) of a token typed into the login form, if it is one: what
        its dashboard session keeps of it."""
        digest = hashlib.sha256(offered.strip().encode()).digest()
        return digest.hex() if _any_equal(digest, self._digests) else None

    def has_digest(self, digest_hex: str) -> bool:
        """Whether a token of this digest is still configured (a session it opened holds)."""
        try:
            digest = bytes.fromhex(digest_hex)
        except ValueError:
            return False
        return _any_equal(digest, self._digests)


def _any_equal(offered: bytes, candidates: list[bytes]) -> bool:
    matched = False
    for candidate in candidates:  # no early exit: every candidate is compared
        matched |= hmac.compare_digest(offered, candidate)
    return matched
