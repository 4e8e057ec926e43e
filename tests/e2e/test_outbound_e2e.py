"""Outbound deliveries end to end with the real `workly dev`: through an egress proxy
(tests/support/proxy.py) to an https receiver whose certificate a custom CA issued
(WORKLY_OUTBOUND_CA_FILE); the v1 signature checked with standardwebhooks, a v1a one with
cryptography's ed25519 and the public key the API shows, and the enqueue's trace id on the
delivery's traceparent. Everything on 127.0.0.1."""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tests.e2e.conftest import WorklyServer, dev_args, drop_workly_env
from tests.support.proxy import running_proxy
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET, TEST_SERVER_ENV, api_client, free_port, workly_process
from workly.signing import generate_key_pair

TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def proxy_port() -> int:
    return free_port()


@pytest.fixture
def dev_behind_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, authority: trustme.CA, proxy_port: int
) -> Iterator[WorklyServer]:
    ca_file = tmp_path / "internal-ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    env = {
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        **TEST_SERVER_ENV,
        "WORKLY_POLL_INTERVAL": "0.2",
        "WORKLY_OUTBOUND_PROXY": f"http://127.0.0.1:{proxy_port}",
        "WORKLY_OUTBOUND_CA_FILE": str(ca_file),
    }
    drop_workly_env(monkeypatch)
    port = free_port()
    log = tmp_path / "workly-dev.log"
    with workly_process(dev_args(tmp_path / "workly.db", port), env, port, log) as base_url:
        yield WorklyServer("dev", base_url, log)


async def test_signed_deliveries_through_the_proxy_to_an_https_receiver(
    dev_behind_proxy: WorklyServer, authority: trustme.CA, proxy_port: int
) -> None:
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(tls)
    private, _ = generate_key_pair()
    async with (
        running_proxy(proxy_port) as proxy,
        running_receiver(TEST_SECRET, tls=tls) as receiver,
        api_client(dev_behind_proxy.base_url) as api,
    ):
        assert (await api.put("/v1/queues/asym", json={"signing_secret": private})).status_code == 201
        public = (await api.get("/v1/queues/asym/public-key")).json()["public_key"]
        traced = {"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"}
        hmac_task = await api.post("/v1/queues/q/tasks", json={"url": receiver.url("/hmac")}, headers=traced)
        assert hmac_task.status_code == 201, hmac_task.text
        ed_task = await api.post("/v1/queues/asym/tasks", json={"url": receiver.url("/ed"), "body": {"n": 1}})
        assert ed_task.status_code == 201, ed_task.text
        [hmac_delivery] = await receiver.wait_for("/hmac", 1)
        [ed_delivery] = await receiver.wait_for("/ed", 1)
    assert "deliveries go through the proxy http://127.0.0.1:" in dev_behind_proxy.output()
    port = receiver.base_url.rsplit(":", 1)[1]
    assert proxy.connects and set(proxy.connects) == {f"127.0.0.1:{port}"}  # tunnels, nothing in the clear
    assert proxy.forwarded == []
    assert hmac_delivery.verified is True  # v1, with the standardwebhooks library
    assert hmac_delivery.headers["traceparent"].split("-")[1] == TRACE
    entries = ed_delivery.headers["webhook-signature"].split()
    assert [e.split(",")[0] for e in entries] == ["v1a"]
    signed = f"{ed_delivery.headers['webhook-id']}.{ed_delivery.headers['webhook-timestamp']}.".encode()
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public.removeprefix("whpk_")))
    key.verify(base64.b64decode(entries[0].removeprefix("v1a,")), signed + ed_delivery.body)  # raises if not
    assert ed_delivery.body == b'{"n":1}'
