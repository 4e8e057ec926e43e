"""Which addresses deliveries may connect to: the SSRF guard's rules, as pure functions.

Workly sends requests to URLs its API callers choose, from inside a network. Unless an
operator allows them (``WORKLY_OUTBOUND_ALLOW``), every address that is not a public
unicast address is refused: loopback, private, link-local (cloud metadata at
169.254.169.254 and fd00:ec2::254 included), shared (100.64/10), multicast, reserved,
documentation and unspecified ranges, IPv6 outside 2000::/3, and the IPv6 spellings that
embed an IPv4 address (IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64, 6to4,
Teredo), judged by the address they embed.

The HTTP client resolves a host once, checks every address it got, and connects only to
those checked addresses, so a second DNS answer (rebinding) never reaches a socket.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")  # IPv4-translated (RFC 7915)
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# IPv6 unicast that is routed on the internet lies in 2000::/3; anything outside it that is
# not named below (or an embedded-IPv4 form) is refused too.
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")

# Named so a refusal says why; anything else that is not globally routable is refused too.
_RANGES: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified ('this network')"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata lives here)"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "local-use NAT64 (its IPv4 may sit anywhere in the address)"),
    ("100::/64", "discard-only"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("fec0::/10", "site-local (deprecated, still routed inside some networks)"),
    ("fc00::/7", "private (unique local; cloud metadata fd00:ec2::254 lives here)"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
)
_NAMED: tuple[tuple[IPNetwork, str], ...] = tuple((ipaddress.ip_network(n), why) for n, why in _RANGES)

LOOPBACK: tuple[IPNetwork, ...] = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


class InvalidAllowList(ValueError):
    """WORKLY_OUTBOUND_ALLOW holds something that is not an address or a CIDR."""


def parse_allow_list(text: str) -> tuple[IPNetwork, ...]:
    """CIDRs or single addresses, separated by spaces or commas."""
    networks = []
    for item in text.replace(",", " ").split():
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise InvalidAllowList(f"not an address or CIDR: {item!r}") from None
    return tuple(networks)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if address in _SIIT:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "IPv4-translated"
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address.teredo is not None:
        return address.teredo[1], "Teredo"
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "IPv4-compatible"
    return None


def refusal(address: IPAddress, allowed: Iterable[IPNetwork] = ()) -> str | None:
    """Why a delivery may not connect to ``address``; None when it may."""
    allowed = tuple(allowed)
    if any(address.version == net.version and address in net for net in allowed):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner, form = embedded
            why = refusal(inner, allowed)
            return None if why is None else f"{form} form of {inner}, which is {why}"
    for network, why in _NAMED:
        if address.version == network.version and address in network:
            return why
    if not address.is_global:
        return "not a public address"
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST:
        return "not global unicast (outside 2000::/3)"
    return None


@dataclass(frozen=True, slots=True)
class OutboundPolicy:
    """The addresses an operator opened on top of the public internet."""

    allowed: tuple[IPNetwork, ...] = ()

    def check(self, host: str, addresses: Sequence[str]) -> list[str]:
        """The addresses to connect to, in order; BlockedTarget if any of them is refused
        (a name that resolves to a public and a private address is refused as a whole)."""
        if not addresses:
            raise BlockedTarget(f"{host} resolved to no address")
        for text in addresses:
            why = refusal(ipaddress.ip_address(text.split("%", 1)[0]), self.allowed)
            if why is not None:
                shown = host if host == text else f"{host} ({text})"
                raise BlockedTarget(
                    f"{shown} is {why}; deliveries to it are refused (WORKLY_OUTBOUND_ALLOW opens it)"
                )
        return list(addresses)


class BlockedTarget(Exception):
    """The target's address is not one deliveries may connect to."""


@dataclass(frozen=True, slots=True)
class Proxy:
    """The egress proxy deliveries go through (WORKLY_OUTBOUND_PROXY)."""

    host: str
    port: int
    # The Proxy-Authorization value, from user:password in the URL; never in a repr or a log.
    authorization: str | None = field(default=None, repr=False)

    def __str__(self) -> str:  # for banners and logs: never the credentials
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class InvalidProxy(ValueError):
    """WORKLY_OUTBOUND_PROXY is not an http:// proxy URL."""


def parse_proxy(url: str) -> Proxy:
    """``http://[user:password@]host[:port]``: an HTTP proxy (CONNECT for https receivers,
    absolute-form requests for http ones). Port 80 unless given."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        # Not the parser's words: they may quote a password (one with a '/' splits the URL).
        raise InvalidProxy(
            "not a URL of the form http://[user:password@]host[:port] with a port of 1-65535 "
            "(percent-encode '/', '@' and ':' in the credentials)"
        ) from None
    if parts.scheme != "http":
        raise InvalidProxy(
            "must be an http:// URL (the proxy is spoken to in plain HTTP; deliveries to https "
            "receivers stay encrypted end to end through its tunnel)"
        )
    if not parts.hostname:
        raise InvalidProxy("must name the proxy's host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidProxy("must be the proxy's address only (no path, query or fragment)")
    if port == 0:
        raise InvalidProxy("the port must be 1-65535")
    authorization = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode("ascii")
    return Proxy(parts.hostname, port or 80, authorization)
