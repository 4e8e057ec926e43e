"""What Workly will send: the rules a delivery's URL and headers must follow.

Pure functions, raising ValueError with a message for people. The API's request schemas
(workly/api/schemas.py) apply them to what callers send, and the delivery client
(workly/dispatch/http_client.py) reads URLs and drops connection headers the same way, so
what is accepted is exactly what can go out.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit

from yarl import URL

MAX_URL_LENGTH = 4096
MAX_HEADERS = 64
MAX_HEADER_VALUE = 8 * 1024
MAX_HEADERS_TOTAL = 32 * 1024

# Headers the client writes itself, or that belong to one connection: a task's own would
# frame the request wrongly. (The API refuses them; tasks stored before it did are filtered.)
CONNECTION_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)
SIGNATURE_HEADERS = frozenset({"webhook-id", "webhook-timestamp", "webhook-signature"})
# fullmatch, never match with ^…$: "$" also matches before a final newline ("a\n").
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Control characters other than tab cannot travel in a header value (CR and LF would
# even split the request, NEL splits lines for some readers); Workly sends header values
# as latin-1, as HTTP/1.1 does.
_FORBIDDEN_VALUE_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # C0, DEL, C1 (NEL splits lines too)


# A host name as RFC 3986 spells one (reg-name: unreserved, sub-delims, %XX); names with
# other characters cannot be looked up. Non-ASCII names are IDNs, IDNA-encoded to send.
_REG_NAME = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+")


def request_target(url: str) -> URL:
    """The URL as the request will use it: an ASCII URL exactly as given (no dot-segment
    removal, no re-encoding); anything else percent-encoded and IDNA-encoded first."""
    return URL(url, encoded=True) if url.isascii() else URL(url)


# The URLs nearly every task has: an ASCII host name or IPv4 address, an optional port, then
# only characters RFC 3986 lets a path, query or fragment carry as they are. For those the
# rules below depend on the origin alone, whose verdict is remembered (a queue's tasks go to
# a few origins); tests/test_request_rules.py checks that both ways agree.
_PLAIN_URL = re.compile(
    r"(https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?)(?:[/?#][A-Za-z0-9\-._~!$&'()*+,;=:@%/?#]*)?"
)


def plain_origin(url: str) -> str | None:
    """``scheme://authority`` of a plain URL (as _PLAIN_URL reads one), else None."""
    plain = _PLAIN_URL.fullmatch(url)
    return None if plain is None else plain.group(1)


def check_url(value: str) -> str:
    """An absolute http(s) URL with a host, no credentials, no whitespace or control characters."""
    origin = plain_origin(value)
    if origin is not None:
        _check_origin(origin)
        return value
    return check_any_url(value)


@lru_cache(maxsize=1024)
def _check_origin(origin: str) -> None:
    check_any_url(origin + "/")


def check_any_url(value: str) -> str:
    """check_url, every rule applied to the whole URL. Each rule reads the scheme and the
    authority only, but for the characters _PLAIN_URL keeps out: a rule that reads the path
    or query must change _PLAIN_URL too, or plain URLs would skip it."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("the URL scheme must be http or https")
    if not parts.hostname:
        raise ValueError("the URL must name a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("the URL must not carry credentials (user:password@); use a header")
    if port == 0:
        raise ValueError("the URL port must be 1-65535")
    if any(ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        raise ValueError("the URL must not contain whitespace or control characters")
    try:
        target = request_target(value)  # the deliverer's own reading of it
    except ValueError as exc:
        raise ValueError(f"not a valid URL: {exc}") from None
    if not target.raw_host:
        raise ValueError("the URL must name a host")
    _check_host(parts.netloc)
    return value


def _check_host(netloc: str) -> None:
    """The host as RFC 3986 allows it: an IPv6 literal or a registered name. (The parsers
    have checked the literal; IPvFuture literals, which no client can reach, are refused.)"""
    if netloc.startswith("["):
        if netloc[1:2] in ("v", "V"):
            raise ValueError("the URL host is an IPvFuture literal, which cannot be reached")
        return
    name = netloc.partition(":")[0]
    if name.isascii() and not _REG_NAME.fullmatch(name):
        raise ValueError(f"the URL host {name!r} has characters a host name cannot have")


def check_headers(value: dict[str, str]) -> dict[str, str]:
    """Headers sent as given: valid names and latin-1 values, none of Workly's own, within limits."""
    if len(value) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers")
    lowered: set[str] = set()
    for name, header_value in value.items():
        _check_header(name, header_value)
        if name.lower() in lowered:
            raise ValueError(f"header {name!r} is given twice")
        lowered.add(name.lower())
    if sum(len(name) + len(v) for name, v in value.items()) > MAX_HEADERS_TOTAL:
        raise ValueError(f"the headers together are longer than {MAX_HEADERS_TOTAL} characters")
    return value


def _check_header(name: str, value: str) -> None:
    if not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"invalid header name {name!r}")
    if _FORBIDDEN_VALUE_CHARS.search(value):
        raise ValueError(f"header {name!r} contains a control character (CR, LF, NUL, …)")
    if value != value.strip(" \t"):
        # HTTP drops it on the way (RFC 9110 §5.5): the receiver would see another value.
        raise ValueError(f"header {name!r} begins or ends with whitespace")
    if not value.isascii() and not _is_latin1(value):
        raise ValueError(f"header {name!r} has characters HTTP headers cannot carry (not latin-1)")
    if name.lower() in SIGNATURE_HEADERS:
        raise ValueError(f"header {name!r} is set by Workly on every delivery (Standard Webhooks)")
    if name.lower() in CONNECTION_HEADERS:
        raise ValueError(f"header {name!r} belongs to the connection; Workly sets what it needs itself")
    if len(value) > MAX_HEADER_VALUE:
        raise ValueError(f"header {name!r} is longer than {MAX_HEADER_VALUE} characters")


def _is_latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True
