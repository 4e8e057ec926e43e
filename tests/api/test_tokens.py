"""Tokens and the dashboard sessions they open (pure: the clock is a number)."""

from __future__ import annotations

import pytest

from workly.web.tokens import SESSION_SECONDS, TokenSet

NOW = 1_800_000_000.0


def test_a_token_opens_a_session_that_other_processes_accept() -> None:
    cookie = TokenSet(["alpha", "beta"]).session_for(" beta ", NOW)
    assert cookie is not None and "beta" not in cookie
    assert TokenSet(["beta", "alpha"]).is_session(cookie, NOW + 5)  # another worker, same tokens


def test_an_unknown_token_opens_nothing() -> None:
    assert TokenSet(["alpha"]).session_for("alpha2", NOW) is None
    assert TokenSet([]).session_for("", NOW) is None


def test_a_session_expires_and_cannot_come_from_the_future() -> None:
    tokens = TokenSet(["alpha"])
    cookie = tokens.session_for("alpha", NOW)
    assert cookie is not None
    assert tokens.is_session(cookie, NOW + SESSION_SECONDS)
    assert not tokens.is_session(cookie, NOW + SESSION_SECONDS + 1)
    assert tokens.is_session(cookie, NOW - 60)  # clocks of processes differ a little
    assert not tokens.is_session(cookie, NOW - 61)


def test_removing_the_token_ends_its_sessions() -> None:
    cookie = TokenSet(["old", "new"]).session_for("old", NOW)
    assert cookie is not None
    assert not TokenSet(["new"]).is_session(cookie, NOW)


@pytest.mark.parametrize(
    "forge",
    [
        lambda c: c[:-1] + ("0" if c[-1] != "0" else "1"),  # another signature
        lambda c: c.replace(c.split(".")[1], str(int(c.split(".")[1]) + 3600)),  # a later login time
        lambda c: "v2" + c[2:],
        lambda c: "v1..",
        lambda c: "v1.1e9.x",
        lambda c: "v1." + "9" * 40 + ".x",
        lambda c: "",
        lambda c: "v1.1800000000.é",
    ],
)
def test_a_tampered_cookie_is_refused(forge: object) -> None:
    tokens = TokenSet(["alpha"])
    cookie = tokens.session_for("alpha", NOW)
    assert cookie is not None and callable(forge)
    assert not tokens.is_session(forge(cookie), NOW)
