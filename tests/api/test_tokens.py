"""Tokens: matched in constant time, and the digest a dashboard session keeps of one (pure)."""

from __future__ import annotations

import hashlib

from workly.web.tokens import TokenSet


def test_a_token_is_matched_by_its_digest_only() -> None:
    tokens = TokenSet(["alpha", "beta"])
    assert tokens.matches(b"beta") and not tokens.matches(b"beta2") and not tokens.matches(b"")
    digest = tokens.digest_of(" beta ")  # as typed into the login form
    assert digest == hashlib.sha256(b"beta").hexdigest()
    assert TokenSet(["beta"]).has_digest(digest)  # another worker, the same token


def test_an_unknown_or_removed_token_has_no_digest() -> None:
    assert TokenSet(["alpha"]).digest_of("alpha2") is None
    assert TokenSet([]).digest_of("") is None
    digest = TokenSet(["old", "new"]).digest_of("old")
    assert digest is not None and not TokenSet(["new"]).has_digest(digest)
    assert not TokenSet(["new"]).has_digest("not hex") and not TokenSet(["new"]).has_digest("")
