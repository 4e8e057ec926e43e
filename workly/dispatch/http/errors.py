"""What can go wrong with one delivery request, short of an answer."""

from __future__ import annotations


class HttpError(Exception):
    """No usable HTTP response arrived."""


class ConnectError(HttpError):
    """No connection could be made (TCP, the proxy's tunnel or TLS): nothing was sent."""


class ProxyRefused(ConnectError):
    """The egress proxy answered the tunnel request with something other than 2xx."""


class ProtocolError(HttpError):
    """The peer did not speak HTTP/1.x, or closed before answering (the request may have
    reached it)."""


class Blocked(HttpError):
    """The outbound policy refuses the target's address: nothing was sent."""


class NotSent(Exception):
    """The caller's ``may_send`` said no right before the request would have been written:
    nothing was sent. Not an HttpError: no attempt was made, so there is nothing to judge."""
