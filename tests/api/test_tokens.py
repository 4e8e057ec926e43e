"""Tokens: matched in constant time, and what a dashboard session keeps of one (pure)."""

from __future__ import annotations

import hashlib

from workly.sessions import new_cookie, token_mac
from workly.web.tokens import TokenSet


def test_a_token_is_matched_by_its_digest_only() -> None:
    tokens = TokenSet(["alpha", "beta"])
    assert tokens.matches(b"beta") and not tokens.matches(b"beta2") and not tokens.matches(b"")
    assert tokens.digest_of(" beta ") == hashlib.sha256(b"beta").digest()  # as typed into the login form
    assert TokenSet(["alpha"]).digest_of("alpha2") is None and TokenSet([]).digest_of("") is None


def test_a_session_names_its_token_only_to_who_holds_its_cookie_and_the_token() -> None:
    cookie = new_cookie()
    mac = token_mac(cookie, hashlib.sha256(b"old").digest())
    assert TokenSet(["new", "old"]).opened_session(cookie, mac)  # another worker, the same tokens
    assert not TokenSet(["new"]).opened_session(cookie, mac)  # the token was removed
    assert not TokenSet(["new", "old"]).opened_session(new_cookie(), mac)  # another cookie
    assert mac != hashlib.sha256(b"old").hexdigest() and "old" not in mac
    assert not TokenSet(["old"]).opened_session(cookie, "é") and not TokenSet(["old"]).opened_session(
        cookie, ""
    )
