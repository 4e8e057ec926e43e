"""The SSRF guard's address rules, as pure functions: no connection is ever made here.

Addresses are written the ways an attacker would spell them; a name is "resolved" by a
fake resolver, so nothing leaves the process.
"""

from __future__ import annotations

import ipaddress

import pytest

from tests.support.receiver import running_receiver
from workly.dispatch.http import Blocked, HttpClient
from workly.ssrf_guard import (
    LOOPBACK,
    BlockedTarget,
    InvalidAllowList,
    OutboundPolicy,
    parse_allow_list,
    refusal,
)

BLOCKED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("::1", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("fd00::1", "private"),
    ("169.254.169.254", "link-local"),  # AWS, GCP, Azure metadata
    ("fd00:ec2::254", "private"),  # AWS metadata over IPv6
    ("fe80::1", "link-local"),
    ("100.64.0.1", "shared address space"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("192.0.2.1", "documentation"),
    ("2001:db8::1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1"),
    ("::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254"),
    ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254"),
    ("64:ff9b:1::a00:1", "local-use NAT64"),
    ("2002:7f00:1::1", "6to4 form of 127.0.0.1"),
    ("2002:a9fe:a9fe::1", "6to4 form of 169.254.169.254"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo form of 127.0.0.1"),
    ("::127.0.0.1", "IPv4-compatible form of 127.0.0.1"),
    ("::ffff:0:a9fe:a9fe", "IPv4-translated form of 169.254.169.254"),
    ("64:ff9b:1:7f00:0:100:808:808", "local-use NAT64"),
    ("fec0::1", "site-local"),
    ("3fff::1", "documentation"),
    ("5f00::1", "not global unicast"),
]
PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize(("address", "why"), BLOCKED)
def test_non_public_addresses_are_refused_with_a_reason(address: str, why: str) -> None:
    reason = refusal(ipaddress.ip_address(address))
    assert reason is not None and why in reason


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"])
def test_the_allow_list_opens_loopback_in_every_spelling(address: str) -> None:
    assert refusal(ipaddress.ip_address(address), LOOPBACK) is None


def test_an_allow_list_opens_only_its_own_ranges() -> None:
    allowed = parse_allow_list("10.0.0.0/8, 192.168.1.5")
    assert refusal(ipaddress.ip_address("10.20.30.40"), allowed) is None
    assert refusal(ipaddress.ip_address("192.168.1.5"), allowed) is None
    assert refusal(ipaddress.ip_address("192.168.1.6"), allowed) == "private"
    assert refusal(ipaddress.ip_address("169.254.169.254"), allowed) is not None


def test_a_bad_allow_list_names_the_bad_item() -> None:
    with pytest.raises(InvalidAllowList, match=r"'10\.0\.0\.300'"):
        parse_allow_list("10.0.0.0/8 10.0.0.300")


def test_a_name_resolving_to_a_public_and_a_private_address_is_refused_whole() -> None:
    with pytest.raises(BlockedTarget, match=r"hooks\.example \(10\.0\.0\.5\) is private"):
        OutboundPolicy().check("hooks.example", ["93.184.216.34", "10.0.0.5"])
    assert OutboundPolicy().check("hooks.example", ["93.184.216.34"]) == ["93.184.216.34"]


def test_a_name_resolving_to_nothing_is_refused() -> None:
    with pytest.raises(BlockedTarget, match="no address"):
        OutboundPolicy().check("nothing.example", [])


async def test_the_client_refuses_before_connecting() -> None:
    """The fake resolver answers with a private address: nothing is connected, nothing sent."""
    resolved: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["93.184.216.34", "10.0.0.5"]

    client = HttpClient(resolver=resolver)
    with pytest.raises(Blocked, match=r"10\.0\.0\.5"):
        await client.request("POST", "http://hooks.example/x", {}, b"{}")
    await client.close()
    assert resolved == ["hooks.example"]


async def test_the_client_connects_to_the_checked_address_it_resolved() -> None:
    """The name never reaches a second lookup: the client dials the address it checked."""
    async with running_receiver() as receiver:
        port = int(receiver.base_url.rsplit(":", 1)[1])

        async def resolver(host: str, port: int) -> list[str]:
            return ["127.0.0.1"]

        client = HttpClient(policy=OutboundPolicy(LOOPBACK), resolver=resolver)
        response = await client.request("GET", f"http://receiver.invalid:{port}/seen", {}, b"")
        await client.close()
    assert response.status == 204
    [request] = receiver.at("/seen")
    assert request.headers["Host"] == f"receiver.invalid:{port}"  # the name, as the URL had it
