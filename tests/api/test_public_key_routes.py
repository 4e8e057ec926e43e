"""GET /v1/queues/{queue}/public-key and /v1/endpoints/{id}/public-key: the whpk_ keys that
verify a queue's or an endpoint's v1a (ed25519) signatures, in-process on both backends."""

from __future__ import annotations

import pytest

from tests.api.conftest import HOOK, Api, assert_problem
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.signing import generate_key_pair, generate_secret


async def test_a_queue_with_its_own_ed25519_key_shows_its_public_key(api: Api) -> None:
    (new, new_public), (old, old_public) = generate_key_pair(), generate_key_pair()
    put = await api.http.put("/v1/queues/signed", json={"signing_secret": f"{new} {generate_secret()} {old}"})
    assert put.status_code == 201, put.text
    assert new.removeprefix("whsk_") not in put.text  # write-only, as every secret
    response = await api.http.get("/v1/queues/signed/public-key")
    assert response.status_code == 200, response.text
    assert response.json() == {"public_key": new_public, "public_keys": [new_public, old_public]}


async def test_a_queue_without_its_own_secret_shows_the_servers_keys_or_none(api: Api) -> None:
    await api.enqueue("plain")
    # The test server signs with one whsec_ secret only: no v1a, no public key.
    problem = assert_problem(await api.http.get("/v1/queues/plain/public-key"), 404, "not-found")
    assert "HMAC only" in problem["detail"]
    assert_problem(await api.http.get("/v1/queues/ghost/public-key"), 404, "not-found")


async def test_an_endpoint_with_an_ed25519_key(api: Api) -> None:
    private, public = generate_key_pair()
    created = await api.http.post("/v1/endpoints", json={"url": HOOK, "signing_secret": private})
    assert created.status_code == 201, created.text
    endpoint = created.json()["id"]
    response = await api.http.get(f"/v1/endpoints/{endpoint}/public-key")
    assert response.json() == {"public_key": public, "public_keys": [public]}
    assert (await api.http.get(f"/v1/endpoints/{endpoint}/secret")).json() == {"signing_secret": private}
    generated = (await api.http.post("/v1/endpoints", json={"url": HOOK})).json()["id"]  # whsec_ only
    assert_problem(await api.http.get(f"/v1/endpoints/{generated}/public-key"), 404, "not-found")
    assert_problem(await api.http.get("/v1/endpoints/ep_00000000000000000000000000/public-key"), 404)


@pytest.mark.parametrize(
    "secret",
    ["whsk_", "whsk_" + "QUFB" * 10, "whpk_" + "A" * 43 + "=", "whsk_!!"],
    ids=["empty", "wrong length", "a public key", "not base64"],
)
async def test_an_unusable_key_is_422_and_stores_nothing(api: Api, secret: str) -> None:
    problem = assert_problem(await api.http.put("/v1/queues/signed", json={"signing_secret": secret}), 422)
    assert secret.removeprefix("whsk_") not in problem["detail"] or secret == "whsk_"
    assert "signed" not in await api.queue_names()
    assert_problem(await api.http.post("/v1/endpoints", json={"url": HOOK, "signing_secret": secret}), 422)
    assert (await api.http.get("/v1/endpoints")).json()["endpoints"] == []


async def test_a_queue_without_its_own_secret_is_signed_with_the_servers_keys(sqlite_url: str) -> None:
    private, public = generate_key_pair()
    settings = Settings(database_url=sqlite_url, signing_secret=f"{TEST_SECRET} {private}", dispatch=False)
    async with in_process(settings) as (_, http):
        api = Api(http)
        await api.enqueue("plain")
        response = await http.get("/v1/queues/plain/public-key")
    assert response.json() == {"public_key": public, "public_keys": [public]}
