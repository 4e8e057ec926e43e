"""Standard Webhooks signatures (https://www.standardwebhooks.com/).

``webhook-signature`` carries one ``v1,<base64 HMAC-SHA256>`` entry per active secret,
space separated, so a receiver holding either the old or the new secret verifies
during a rotation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from workly.errors import ConfigError

PREFIX = "whsec_"


def generate_secret() -> str:
    return PREFIX + base64.b64encode(os.urandom(32)).decode()


def decode_secret(secret: str) -> bytes:
    if not secret.startswith(PREFIX):
        raise ConfigError("a signing secret must look like whsec_<base64>")
    try:
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        raise ConfigError(
            "a signing secret must look like whsec_<base64>: the base64 part is invalid"
        ) from None
    if len(key) < 16:
        raise ConfigError("a signing secret must hold at least 16 bytes of key")
    return key


class Signer:
    def __init__(self, secrets: list[str]) -> None:
        if not secrets:
            raise ConfigError("at least one signing secret is required")
        self._keys = [decode_secret(secret) for secret in secrets]

    def signature(self, msg_id: str, timestamp: int, body: bytes) -> str:
        signed = f"{msg_id}.{timestamp}.".encode() + body
        return " ".join(
            "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
            for key in self._keys
        )

    def headers(self, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": self.signature(msg_id, timestamp, body),
        }
