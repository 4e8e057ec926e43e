"""Signatures verify with the standardwebhooks library, one per active secret."""

from __future__ import annotations

import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from workly.errors import ConfigError
from workly.signing import Signer, decode_secret, generate_secret

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


@pytest.mark.parametrize("bad", ["", "secret", "whsec_", "whsec_!!!notbase64", "whsec_c2hvcnQ="])
def test_malformed_secrets_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        decode_secret(bad)


def test_at_least_one_secret() -> None:
    with pytest.raises(ConfigError):
        Signer([])
