"""Deliveries through an egress proxy (a recording proxy on 127.0.0.1, tests/support/proxy.py):
https receivers through a CONNECT tunnel with TLS end to end, http ones as absolute-form
requests, the proxy's credentials, its refusals, and the SSRF policy still applied to what
Workly can see of the target."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest
import trustme

from tests.support.proxy import RecordingProxy, running_proxy
from tests.support.raw_server import OK, answering, forever, raw_server
from workly.dispatch.http import Blocked, ConnectError, HttpClient, ProxyRefused
from workly.dispatch.http import client as http_client
from workly.ssrf_guard import LOOPBACK, OutboundPolicy, Proxy, parse_proxy

LOCAL = OutboundPolicy(LOOPBACK)


@pytest.fixture
async def proxy() -> AsyncIterator[RecordingProxy]:
    async with running_proxy() as running:
        yield running


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def through(proxy: RecordingProxy, authority: trustme.CA | None = None, **kwargs: object) -> HttpClient:
    tls = ssl.create_default_context()
    if authority is not None:
        authority.configure_trust(tls)
    return HttpClient(policy=LOCAL, ssl_context=tls, proxy=parse_proxy(proxy.url), **kwargs)  # type: ignore[arg-type]


async def test_an_https_receiver_is_reached_through_a_connect_tunnel(
    proxy: RecordingProxy, authority: trustme.CA
) -> None:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)
    seen: list[bytes] = []
    client = through(proxy, authority)
    try:
        async with raw_server(answering(OK, OK, record=seen), tls=server_tls) as server:
            first = await client.request("POST", server.url + "/hook", {"x-a": "1"}, b"body", timeout=5)
            second = await client.request("POST", server.url + "/hook", {}, b"again", timeout=5)
    finally:
        await client.close()
    port = server.url.rsplit(":", 1)[1]
    assert (first.status, second.status) == (204, 204)
    assert proxy.connects == [f"127.0.0.1:{port}"]  # one tunnel, kept alive for both
    assert seen[0].startswith(b"POST /hook HTTP/1.1\r\n") and seen[0].endswith(b"body")
    assert proxy.forwarded == []  # the proxy saw no request in the clear


async def test_an_http_receiver_is_reached_with_absolute_form_requests(proxy: RecordingProxy) -> None:
    client = through(proxy)
    try:
        async with raw_server(answering(OK)) as server:
            response = await client.request("GET", server.url + "/a?b=1", {}, b"", timeout=5)
    finally:
        await client.close()
    assert response.status == 204
    assert proxy.forwarded == [f"GET {server.url}/a?b=1 HTTP/1.1"]
    assert proxy.connects == []


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_the_proxys_credentials_go_with_each_request(
    proxy: RecordingProxy, authority: trustme.CA, scheme: str
) -> None:
    server_tls = None
    if scheme == "https":
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        authority.issue_cert("127.0.0.1").configure_cert(server_tls)
    tls = ssl.create_default_context()
    authority.configure_trust(tls)
    with_credentials = proxy.url.replace("http://", "http://deliver%40ies:s%3Acret@")
    client = HttpClient(policy=LOCAL, ssl_context=tls, proxy=parse_proxy(with_credentials))
    try:
        async with raw_server(answering(OK), tls=server_tls) as server:
            assert (await client.request("POST", server.url + "/", {}, b"", timeout=5)).status == 204
    finally:
        await client.close()
    assert proxy.authorizations == ["Basic ZGVsaXZlckBpZXM6czpjcmV0"]  # deliver@ies:s:cret


async def test_a_refusing_proxy_is_a_connect_failure_that_says_what_it_answered(
    proxy: RecordingProxy, authority: trustme.CA
) -> None:
    proxy.refuse_with = b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n"
    client = through(proxy, authority)
    try:
        with pytest.raises(ProxyRefused, match="407 Proxy Authentication Required"):
            await client.request("POST", "https://127.0.0.1:9/", {}, b"", timeout=5)
    finally:
        await client.close()


async def test_targets_the_policy_refuses_are_refused_before_the_proxy_is_asked(
    proxy: RecordingProxy,
) -> None:
    """What Workly can see of the target is checked: an IP literal, and a name its own
    resolver resolves. The proxy is never contacted for them."""

    async def resolver(host: str, port: int) -> list[str]:
        if host == "internal.example":
            return ["10.1.2.3"]
        if host == "127.0.0.1":
            return ["127.0.0.1"]
        raise OSError("no such host")

    client = HttpClient(policy=OutboundPolicy(), proxy=parse_proxy(proxy.url), resolver=resolver)
    try:
        for url in ("https://169.254.169.254/latest", "http://[fd00:ec2::254]/", "https://internal.example/"):
            with pytest.raises(Blocked):
                await client.request("POST", url, {}, b"", timeout=5)
        assert proxy.connects == proxy.forwarded == []
        # A name only the proxy can resolve is the proxy's to judge: this one refuses it.
        with pytest.raises(ProxyRefused, match="403"):
            await client.request("POST", "https://only-the-proxy-knows.example/", {}, b"", timeout=5)
    finally:
        await client.close()
    assert proxy.connects == ["only-the-proxy-knows.example:443"]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://proxy.internal:3128", Proxy("proxy.internal", 3128)),
        ("http://proxy.internal", Proxy("proxy.internal", 80)),
        ("http://[fd00::1]:4750/", Proxy("fd00::1", 4750)),
        ("http://u:p@10.0.0.5:8080", Proxy("10.0.0.5", 8080, "Basic dTpw")),
    ],
)
def test_proxy_urls(url: str, expected: Proxy) -> None:
    assert parse_proxy(url) == expected
    assert "@" not in str(parse_proxy(url))  # credentials never shown


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://proxy:443", "http://"),
        ("socks5://proxy:1080", "http://"),
        ("http://:3128", "host"),
        ("http://proxy:3128/path", "address only"),
        ("http://proxy:0", "1-65535"),
        ("http://proxy:99999", "URL"),
    ],
)
def test_proxy_urls_that_are_refused(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_proxy(url)


async def test_one_spelling_of_the_host_is_checked_and_sent(proxy: RecordingProxy) -> None:
    """A trailing dot leaves yarl's Host header and a proxy's target without it: the check
    must not see "127.0.0.1." (a name) while the proxy gets 127.0.0.1. A percent-encoded
    name (which a proxy might decode) is refused outright."""

    looked_up: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        looked_up.append(host)
        if host in ("localhost", "localhost."):
            return ["127.0.0.1"]
        raise OSError("no such host")  # never a real lookup

    client = HttpClient(policy=OutboundPolicy(), proxy=parse_proxy(proxy.url), resolver=resolver)
    try:
        for url in (
            "http://127.0.0.1.:8080/",
            "http://127.0.0.1..:8080/",
            "https://127.0.0.1./",
            "http://localhost.:8080/",
            "http://127.0.0.%31:8080/",
            "http://%6c%6fcalhost/",
            "http://[fe80::1%25eth0]/",
            "http://127.1/",  # other spellings of addresses, judged without a lookup
            "http://0x7f.1/",
            "http://2130706433/",
            "http://./",
        ):
            with pytest.raises(Blocked):
                await client.request("POST", url, {}, b"", timeout=5)
    finally:
        await client.close()
    assert proxy.connects == proxy.forwarded == []
    assert looked_up == ["localhost."]  # an absolute name is looked up as one


async def test_the_host_header_and_the_tunnel_name_the_checked_host(proxy: RecordingProxy) -> None:
    seen: list[bytes] = []
    client = HttpClient(policy=LOCAL, proxy=parse_proxy(proxy.url))
    try:
        async with raw_server(answering(OK, record=seen)) as server:
            dotted = server.url.replace("127.0.0.1", "127.0.0.1.")
            assert (await client.request("GET", dotted + "/x", {}, b"", timeout=5)).status == 204
    finally:
        await client.close()
    port = server.url.rsplit(":", 1)[1]
    assert proxy.forwarded == [f"GET http://127.0.0.1:{port}/x HTTP/1.1"]
    assert f"host: 127.0.0.1:{port}".encode() in seen[0].split(b"\r\n")


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"HTTP/1.1 \xb2\xb2\xb2 Weird\r\n\r\n", "did not answer CONNECT in HTTP"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "did not answer CONNECT in HTTP"),
        (b"HTTP/1.1 502 Bad Gateway\n\r\n", "502 Bad Gateway"),  # a bare-LF line, then CRLF
        (b"HTTP/1.1 403 Forbidden\n\n", "403 Forbidden"),
    ],
)
async def test_odd_answers_to_connect_are_refusals_not_hangs(
    proxy: RecordingProxy, answer: bytes, error: str
) -> None:
    proxy.refuse_with = answer
    client = HttpClient(policy=LOCAL, proxy=parse_proxy(proxy.url))
    try:
        with pytest.raises(ProxyRefused, match=error):
            await client.request("POST", "https://127.0.0.1:9/", {}, b"", timeout=3)
    finally:
        await client.close()


def test_a_proxy_url_that_does_not_parse_never_shows_its_password() -> None:
    with pytest.raises(ValueError, match="percent-encode") as refused:
        parse_proxy("http://svc:Hunter2Secret/x@proxy.internal:3128")
    assert "Hunter2" not in str(refused.value)
    assert "Basic" not in repr(parse_proxy("http://svc:Hunter2Secret@proxy.internal:3128"))


async def test_a_forwarding_proxys_407_is_its_refusal_not_the_receivers_answer(proxy: RecordingProxy) -> None:
    proxy.refuse_with = b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n"
    client = HttpClient(policy=LOCAL, proxy=parse_proxy(proxy.url))
    try:
        with pytest.raises(ProxyRefused, match="407"):
            await client.request("POST", "http://127.0.0.1:9/hook", {}, b"", timeout=5)
    finally:
        await client.close()
    assert proxy.forwarded == ["POST http://127.0.0.1:9/hook HTTP/1.1"]


async def test_a_proxy_that_is_down_is_named() -> None:
    async with raw_server(answering(OK)) as nothing:  # a free port: closed again below
        dead = nothing.url.replace("http://", "http://u:p@")
    client = HttpClient(policy=LOCAL, proxy=parse_proxy(dead))
    try:
        with pytest.raises(
            ConnectError, match=r"no connection to the proxy http://127\.0\.0\.1:\d+"
        ) as failed:
            await client.request("POST", "http://127.0.0.1:9/hook", {}, b"", timeout=5)
    finally:
        await client.close()
    assert "u:p" not in str(failed.value)


async def test_a_lookup_that_hangs_leaves_a_name_to_the_proxy_but_never_an_address(
    proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_client, "PROXIED_LOOKUP_TIMEOUT", 0.1)

    async def hangs(host: str, port: int) -> list[str]:
        await forever()  # a resolver that never answers (only the proxy has DNS)
        raise AssertionError("unreachable")

    client = HttpClient(policy=OutboundPolicy(), proxy=parse_proxy(proxy.url), resolver=hangs)
    try:
        with pytest.raises(Blocked):
            await client.request("POST", "http://127.1/", {}, b"", timeout=5)
        with pytest.raises(ProxyRefused, match="403"):  # the proxy's own rules refuse it
            await client.request("POST", "https://only-the-proxy-knows.test/", {}, b"", timeout=5)
    finally:
        await client.close()
    assert proxy.connects == ["only-the-proxy-knows.test:443"]


async def test_the_tunnel_is_asked_for_the_host_without_its_trailing_dot(proxy: RecordingProxy) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]  # never a real lookup

    client = HttpClient(policy=LOCAL, proxy=parse_proxy(proxy.url), resolver=resolver)
    try:
        with pytest.raises(ProxyRefused):  # this proxy takes 127.0.0.1 only
            await client.request("POST", "https://localhost.:8443/", {}, b"", timeout=5)
    finally:
        await client.close()
    assert proxy.connects == ["localhost:8443"]
