"""TLS for deliveries: a custom CA (WORKLY_OUTBOUND_CA_FILE) and a client certificate for
receivers that require one (mTLS), with trustme's CA on 127.0.0.1; and the clear error for
each file that cannot be used."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from tests.support.raw_server import OK, answering, raw_server
from workly.dispatch.http import ConnectError, HttpClient, HttpError, client_tls
from workly.errors import ConfigError
from workly.ssrf_guard import LOOPBACK, OutboundPolicy

LOCAL = OutboundPolicy(LOOPBACK)


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def server_tls(authority: trustme.CA, client_ca: trustme.CA | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    if client_ca is not None:  # the receiver requires a client certificate its CA issued
        context.verify_mode = ssl.CERT_REQUIRED
        client_ca.configure_trust(context)
    return context


async def status_with(tls: ssl.SSLContext, server: ssl.SSLContext) -> int:
    client = HttpClient(policy=LOCAL, ssl_context=tls)
    try:
        async with raw_server(answering(OK), tls=server) as receiver:
            return (await client.request("POST", receiver.url + "/", {}, b"", timeout=5)).status
    finally:
        await client.close()


async def test_a_receiver_signed_by_the_custom_ca_is_trusted(authority: trustme.CA, tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    assert await status_with(client_tls(ca_file=str(ca_file)), server_tls(authority)) == 204
    with pytest.raises(ConnectError, match="certificate verify failed"):
        await status_with(client_tls(), server_tls(authority))


async def test_the_custom_ca_is_added_to_the_system_trust_store(
    tmp_path: Path, authority: trustme.CA
) -> None:
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    system = len(ssl.create_default_context().get_ca_certs())
    assert len(client_tls(ca_file=str(ca_file)).get_ca_certs()) == system + 1


async def test_a_receiver_that_requires_a_client_certificate_gets_it(
    authority: trustme.CA, tmp_path: Path
) -> None:
    clients = trustme.CA()
    issued = clients.issue_cert("workly.test")
    cert, key, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    authority.cert_pem.write_to_path(str(ca_file))
    with_cert = client_tls(ca_file=str(ca_file), client_cert=str(cert), client_key=str(key))
    assert await status_with(with_cert, server_tls(authority, client_ca=clients)) == 204
    # Without one the receiver ends the connection (TLS 1.3 tells it after the handshake:
    # either way, no response), and the error says what may be missing.
    with pytest.raises(HttpError, match="client certificate"):
        await status_with(client_tls(ca_file=str(ca_file)), server_tls(authority, client_ca=clients))


async def test_a_certificate_and_key_in_one_file(authority: trustme.CA, tmp_path: Path) -> None:
    clients = trustme.CA()
    both, ca_file = tmp_path / "both.pem", tmp_path / "ca.pem"
    clients.issue_cert("workly.test").private_key_and_cert_chain_pem.write_to_path(str(both))
    authority.cert_pem.write_to_path(str(ca_file))
    tls = client_tls(ca_file=str(ca_file), client_cert=str(both))
    assert await status_with(tls, server_tls(authority, client_ca=clients)) == 204


def test_files_that_cannot_be_used_are_named(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    clients = trustme.CA().issue_cert("workly.test")
    cert, other_key = tmp_path / "cert.pem", tmp_path / "other.pem"
    clients.cert_chain_pems[0].write_to_path(str(cert))
    trustme.CA().issue_cert("x.test").private_key_pem.write_to_path(str(other_key))
    encrypted = tmp_path / "encrypted.pem"
    _write_encrypted_key(encrypted)
    cases = [
        ({"ca_file": str(tmp_path / "missing.pem")}, "WORKLY_OUTBOUND_CA_FILE .*: no such file"),
        ({"ca_file": str(garbage)}, "WORKLY_OUTBOUND_CA_FILE .*: no PEM certificate"),
        ({"client_key": str(other_key)}, "WORKLY_OUTBOUND_CLIENT_KEY needs WORKLY_OUTBOUND_CLIENT_CERT"),
        ({"client_cert": str(cert)}, "WORKLY_OUTBOUND_CLIENT_CERT .*could not be loaded"),  # no key
        ({"client_cert": str(cert), "client_key": str(other_key)}, "could not be loaded"),  # not its key
        ({"client_cert": str(cert), "client_key": str(encrypted)}, "unencrypted"),
        (
            {"client_cert": str(cert), "client_key": str(tmp_path)},
            "WORKLY_OUTBOUND_CLIENT_KEY .*: no such file",
        ),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError, match=message):
            client_tls(**kwargs)


def _write_encrypted_key(path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
