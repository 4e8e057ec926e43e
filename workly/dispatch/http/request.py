"""The bytes of one request: its head as the task gives it, and the framing Workly sets."""

from __future__ import annotations

from collections.abc import Mapping

from yarl import URL

from workly.request_rules import CONNECTION_HEADERS

_BODYLESS_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def encode_request(
    method: str,
    target: URL,
    authority: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    absolute: bool = False,
    proxy_authorization: str | None = None,
) -> bytes:
    """``authority``: the host[:port] the Host header (and an absolute-form target) names.
    ``absolute``: the request goes to a forwarding proxy, so its target is the whole URL
    (RFC 9112 absolute-form) instead of the path; the proxy's credentials go with it."""
    path = target.raw_path_qs
    if absolute:
        path = f"{target.scheme}://{authority}{path}"
    lines = [f"{method} {path} HTTP/1.1", f"host: {authority}"]
    if proxy_authorization is not None:
        lines.append(f"proxy-authorization: {proxy_authorization}")
    own = ((name, value) for name, value in headers.items() if name.lower() not in CONNECTION_HEADERS)
    lines.extend(f"{name}: {value}" for name, value in own)
    if body or method not in _BODYLESS_METHODS:
        lines.append(f"content-length: {len(body)}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1") + body
