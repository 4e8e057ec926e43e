"""Signatures verify with the standardwebhooks library (v1) and cryptography's ed25519 (v1a),
one per active secret or key."""

from __future__ import annotations

import base64
import hmac
import time

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from workly.errors import ConfigError
from workly.signing import (
    Signer,
    check_secret,
    decode_secret,
    generate_key_pair,
    generate_secret,
    public_key_of,
    public_keys,
)

BODY = b'{"event":"paid","amount":100}'


def _verify(secret: str, headers: dict[str, str], body: bytes = BODY) -> None:
    Webhook(secret).verify(body, headers)


def test_headers_verify_with_the_reference_library() -> None:
    secret = generate_secret()
    headers = Signer([secret]).headers("task_1", int(time.time()), BODY)
    assert headers["webhook-id"] == "task_1"
    _verify(secret, headers)
    with pytest.raises(WebhookVerificationError):
        _verify(secret, headers, BODY + b" ")


def test_every_active_secret_signs_during_a_rotation() -> None:
    old, new, stranger = generate_secret(), generate_secret(), generate_secret()
    headers = Signer([new, old]).headers("task_2", int(time.time()), BODY)
    assert len(headers["webhook-signature"].split(" ")) == 2
    _verify(old, headers)
    _verify(new, headers)
    with pytest.raises(WebhookVerificationError):
        _verify(stranger, headers)


def test_signature_is_over_id_timestamp_and_body() -> None:
    signer = Signer(["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
    # The Standard Webhooks specification's own example.
    signature = signer.signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


@pytest.mark.parametrize("size", [0, 2047, 2048, 1 << 20])
def test_one_signer_signs_message_after_message_as_the_reference_library_checks(size: int) -> None:
    """The keyed state is copied per message, never updated itself: each signature is over
    its own message alone, for small bodies and for those large enough to be hashed
    without the GIL."""
    secret = generate_secret()
    signer = Signer([secret])
    for n in range(3):
        body, timestamp = bytes([n]) * size, int(time.time())
        expected = hmac.digest(decode_secret(secret), f"msg_{n}.{timestamp}.".encode() + body, "sha256")
        signature = signer.headers(f"msg_{n}", timestamp, body)["webhook-signature"]
        assert signature == "v1," + base64.b64encode(expected).decode()


@pytest.mark.parametrize("bad", ["", "secret", "whsec_", "whsec_!!!notbase64", "whsec_c2hvcnQ="])
def test_malformed_secrets_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        decode_secret(bad)


def test_at_least_one_secret() -> None:
    with pytest.raises(ConfigError):
        Signer([])


# --- v1a: ed25519 -----------------------------------------------------------------------------


def _public_key(whpk: str) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(whpk.removeprefix("whpk_")))


def _v1a_signatures(header: str) -> list[bytes]:
    return [base64.b64decode(e.removeprefix("v1a,")) for e in header.split() if e.startswith("v1a,")]


def test_a_v1a_signature_verifies_with_the_public_key() -> None:
    private, public = generate_key_pair()
    assert private.startswith("whsk_") and public.startswith("whpk_")
    assert public_key_of(private) == public
    headers = Signer([private]).headers("msg_1", 1700000000, BODY)
    [signature] = _v1a_signatures(headers["webhook-signature"])
    _public_key(public).verify(signature, b"msg_1.1700000000." + BODY)  # raises if not
    with pytest.raises(InvalidSignature):
        _public_key(public).verify(signature, b"msg_1.1700000000." + BODY + b" ")


def test_the_reference_librarys_v1a_example() -> None:
    # The Standard Webhooks Go library's signing test: key, message and expected signature.
    signer = Signer(["whsk_VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk="])
    signature = signer.signature("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert signature == (
        "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="
    )


def test_v1_and_v1a_side_by_side_in_the_order_given() -> None:
    hmac_secret = generate_secret()
    private, public = generate_key_pair()
    headers = Signer([private, hmac_secret]).headers("msg_2", int(time.time()), BODY)
    first, second = headers["webhook-signature"].split(" ")
    assert first.startswith("v1a,") and second.startswith("v1,")
    _verify(hmac_secret, headers)  # the v1 entry, with the reference library
    _public_key(public).verify(
        _v1a_signatures(first)[0], f"msg_2.{headers['webhook-timestamp']}.".encode() + BODY
    )
    assert Signer([hmac_secret, private]).public_keys == [public]


def test_a_64_byte_key_is_its_seed_and_public_key() -> None:
    private, public = generate_key_pair()
    seed = base64.b64decode(private.removeprefix("whsk_"))
    both = "whsk_" + base64.b64encode(seed + base64.b64decode(public.removeprefix("whpk_"))).decode()
    assert public_key_of(both) == public
    other = base64.b64decode(generate_key_pair()[1].removeprefix("whpk_"))
    with pytest.raises(ConfigError, match="does not belong"):
        check_secret("whsk_" + base64.b64encode(seed + other).decode())


@pytest.mark.parametrize(
    "bad",
    ["whsk_", "whsk_!!!", "whsk_" + base64.b64encode(b"x" * 31).decode(), "whpk_" + "A" * 44, "whsk_ünïcode"],
)
def test_malformed_keys_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        check_secret(bad)


def test_public_keys_of_a_secret_list() -> None:
    first, second = generate_key_pair(), generate_key_pair()
    assert public_keys(f"{first[0]} {generate_secret()} {second[0]}") == [first[1], second[1]]
    assert public_keys(None) == public_keys(generate_secret()) == []


def test_a_public_key_given_to_sign_with_says_what_it_is() -> None:
    with pytest.raises(ConfigError, match="public key"):
        check_secret(generate_key_pair()[1])
