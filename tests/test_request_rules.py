"""check_url's shortcut for plain URLs (the origin's verdict, remembered) agrees with every
rule applied to the whole URL: the same URLs pass, the same fail; and origin_of's, remembered
by scheme and authority, is the whole URL's. Pure functions only."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from workly.request_rules import _PLAIN_URL, check_any_url, check_url
from workly.webhooks import _origin_of_any, origin_of

_HOST = st.from_regex(r"[A-Za-z0-9.\-]{0,12}", fullmatch=True)
_PORT = st.one_of(st.just(""), st.from_regex(r":[0-9]{0,6}", fullmatch=True))
_REST = st.from_regex(r"(?:[/?#][A-Za-z0-9\-._~!$&'()*+,;=:@%/?#\[\] ]{0,20})?", fullmatch=True)


def _verdict(check: object, url: str) -> str:
    assert callable(check)
    try:
        check(url)
    except ValueError:
        return "refused"
    return "accepted"


@settings(max_examples=500, deadline=None)
@given(scheme=st.sampled_from(["http", "https", "HTTP", "ftp"]), host=_HOST, port=_PORT, rest=_REST)
@example(scheme="http", host="a", port=":0", rest="/")
@example(scheme="http", host="a", port=":65536", rest="")
@example(scheme="http", host="", port="", rest="/x")
@example(scheme="http", host="1.2.3.4", port=":443", rest="/%zz?a=b#c")
def test_plain_urls_get_the_verdict_of_every_rule(scheme: str, host: str, port: str, rest: str) -> None:
    url = f"{scheme}://{host}{port}{rest}"
    assert _verdict(check_url, url) == _verdict(check_any_url, url), url


@settings(max_examples=500, deadline=None)
@given(st.from_regex(_PLAIN_URL, fullmatch=True))
def test_plain_urls_from_the_pattern_get_the_verdict_of_every_rule(url: str) -> None:
    assert _PLAIN_URL.fullmatch(url)  # every example takes the shortcut
    assert _verdict(check_url, url) == _verdict(check_any_url, url), url


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_any_text_gets_the_verdict_of_every_rule(text: str) -> None:
    url = "http://" + text
    assert _verdict(check_url, url) == _verdict(check_any_url, url), url


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:7337/d/1", "https://hooks.example.com/a/b?c=d&e=%20#f", "http://x-y.z:8080"],
)
def test_common_urls_take_the_shortcut(url: str) -> None:
    assert _PLAIN_URL.fullmatch(url)
    assert check_url(url) == url


def _origin(origin_of: object, url: str) -> str:
    assert callable(origin_of)
    try:
        return str(origin_of(url))
    except ValueError as exc:  # a port urlsplit cannot read
        return f"ValueError: {exc}"


@settings(max_examples=500, deadline=None)
@given(scheme=st.sampled_from(["http", "https"]), host=_HOST, port=_PORT, rest=_REST)
@example(scheme="https", host="Hooks.Example.COM", port="", rest="/a?b#c")
@example(scheme="http", host="1.2.3.4", port=":8080", rest="?x")
def test_a_breakers_origin_remembered_by_authority_is_the_whole_urls(
    scheme: str, host: str, port: str, rest: str
) -> None:
    """origin_of remembers a plain URL's origin by its scheme and authority: the same
    origin as reading the whole URL gives (the path, query and fragment do not count)."""
    url = f"{scheme}://{host}{port}{rest}"
    assert _origin(origin_of, url) == _origin(_origin_of_any, url), url
