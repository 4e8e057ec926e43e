"""Signing secrets at rest with WORKLY_SECRET_KEY, on both backends: nothing of a secret is in
the database (before, an endpoint's whsec_ key could be read straight out of it), the API
answers them as given, and a rotation (new key first, `reseal`, old key dropped) keeps them."""

from __future__ import annotations

import base64
import os
from typing import Any

from tests.api.conftest import HOOK
from tests.support.receiver import _verify, running_receiver
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.service import Service
from workly.signing import generate_secret

OLD_KEY, NEW_KEY = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))


def settings(database_url: str, secret_key: str | None) -> Settings:
    return Settings(
        database_url=database_url, signing_secret=TEST_SECRET, dispatch=False, secret_key=secret_key
    )


async def stored_secrets(service: Service) -> list[Any]:
    """The signing_secret column of every queue, as the database holds it."""
    return [queue.config.signing_secret for queue in await service.storage.queues.list_queues()]


async def test_secrets_are_stored_sealed_and_answered_as_given_and_survive_a_rotation(
    database_url: str,
) -> None:
    endpoint_secret, queue_secret = generate_secret(), generate_secret()
    async with in_process(settings(database_url, OLD_KEY)) as (service, http):
        made = await http.post("/v1/endpoints", json={"url": HOOK, "signing_secret": endpoint_secret})
        endpoint_id = made.json()["id"]
        assert (await http.put("/v1/queues/signed", json={"signing_secret": queue_secret})).status_code == 201
        stored = await stored_secrets(service)
        assert len(stored) == 2 and all(s.startswith("wkenc1:") for s in stored)
        assert not any("whsec_" in s for s in stored)
        assert (await http.get(f"/v1/endpoints/{endpoint_id}/secret")).json()[
            "signing_secret"
        ] == endpoint_secret
        # A change that leaves the secret alone keeps it; one that gives a new one seals that.
        assert (
            await http.patch(f"/v1/endpoints/{endpoint_id}", json={"description": "x"})
        ).status_code == 200
        assert (await http.patch("/v1/queues/signed", json={"max_attempts": 2})).status_code == 200
        assert (await http.get(f"/v1/endpoints/{endpoint_id}/secret")).json()[
            "signing_secret"
        ] == endpoint_secret
    # Rotation: the new key first, the old one after it; reseal; then the new key alone.
    async with in_process(settings(database_url, f"{NEW_KEY} {OLD_KEY}")) as (service, http):
        assert await service.queues.reseal_secrets() == 2
        assert await service.queues.reseal_secrets() == 0  # done already
    async with in_process(settings(database_url, NEW_KEY)) as (service, http):
        assert (await http.get(f"/v1/endpoints/{endpoint_id}/secret")).json()[
            "signing_secret"
        ] == endpoint_secret
        assert all(s.startswith("wkenc1:") for s in await stored_secrets(service))


async def test_secrets_stored_before_a_key_was_set_are_sealed_by_reseal(database_url: str) -> None:
    secret = generate_secret()
    async with in_process(settings(database_url, None)) as (service, http):
        await http.put("/v1/queues/plain", json={"signing_secret": secret})
        assert await stored_secrets(service) == [secret]
    async with in_process(settings(database_url, OLD_KEY)) as (service, http):
        assert (await http.get("/v1/queues/plain")).json()["has_signing_secret"] is True
        assert await service.queues.reseal_secrets() == 1
        [sealed] = await stored_secrets(service)
        assert sealed.startswith("wkenc1:") and secret not in sealed


async def test_a_delivery_is_signed_with_the_sealed_secret_as_given(database_url: str) -> None:
    secret = generate_secret()
    delivery = Settings(
        database_url=database_url, signing_secret=TEST_SECRET, secret_key=OLD_KEY,
        outbound_allow="127.0.0.0/8", poll_interval=0.2,
    )  # fmt: skip
    async with running_receiver() as receiver, in_process(delivery) as (service, http):
        made = await http.post(
            "/v1/endpoints", json={"url": receiver.url("/sealed"), "signing_secret": secret}
        )
        assert made.status_code == 201, made.text
        assert (await stored_secrets(service))[0].startswith("wkenc1:")
        assert (
            await http.post("/v1/events", json={"type": "invoice.paid", "payload": {}})
        ).status_code == 201
        [got] = await receiver.wait_for("/sealed", 1)
        assert _verify(secret, got.body, got.headers)
