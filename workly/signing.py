"""Standard Webhooks signatures (https://www.standardwebhooks.com/).

``webhook-signature`` carries one entry per active key, space separated, so a receiver
holding either the old or the new key verifies during a rotation:

- ``v1,<base64 HMAC-SHA256>`` for a ``whsec_<base64>`` secret, shared with the receiver;
- ``v1a,<base64 ed25519 signature>`` for a ``whsk_<base64>`` private key (its 32-byte seed,
  or the 64 bytes of seed and public key), whose ``whpk_<base64>`` public key the receiver
  holds: it can check signatures but not make them.

Both sign ``{id}.{timestamp}.{body}``. The ed25519 arithmetic is the cryptography package's
(OpenSSL), imported only when a ``whsk_`` key is in use.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from workly.errors import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

PREFIX = "whsec_"
PRIVATE_KEY_PREFIX = "whsk_"
PUBLIC_KEY_PREFIX = "whpk_"
_FORMATS = "whsec_<base64> (HMAC) or whsk_<base64> (ed25519)"


def generate_secret() -> str:
    return PREFIX + base64.b64encode(os.urandom(32)).decode()


def generate_key_pair() -> tuple[str, str]:
    """A new ed25519 key pair: (``whsk_…`` private key, ``whpk_…`` public key)."""
    private = PRIVATE_KEY_PREFIX + base64.b64encode(os.urandom(32)).decode()
    return private, public_key_of(private)


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # ValueError: non-ASCII text
        raise ConfigError(f"a signing secret must look like {_FORMATS}: the base64 part is invalid") from None


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret."""
    if not secret.startswith(PREFIX):
        raise ConfigError(f"a signing secret must look like {_FORMATS}")
    key = _base64(secret.removeprefix(PREFIX))
    if len(key) < 16:
        raise ConfigError("a signing secret must hold at least 16 bytes of key")
    return key


def check_secret(secret: str) -> None:
    """A ``whsec_`` secret or a ``whsk_`` private key that signs; ConfigError otherwise."""
    if secret.startswith(PUBLIC_KEY_PREFIX):
        raise ConfigError(
            "a whpk_ key is a public key, which verifies but cannot sign: give the whsk_ private key "
            "here, and the whpk_ one to the receivers"
        )
    if secret.startswith(PRIVATE_KEY_PREFIX):
        _private_key(secret)
    else:
        decode_secret(secret)


def _private_key(secret: str) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    raw = _base64(secret.removeprefix(PRIVATE_KEY_PREFIX))
    if len(raw) not in (32, 64):
        raise ConfigError(
            "an ed25519 key must be whsk_ and the base64 of its 32-byte seed (or of the 64 bytes of "
            "seed and public key)"
        )
    key = Ed25519PrivateKey.from_private_bytes(raw[:32])
    if len(raw) == 64 and raw[32:] != _public_bytes(key):
        raise ConfigError("the public half of this 64-byte ed25519 key does not belong to its seed")
    return key


def _public_bytes(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def public_key_of(secret: str) -> str:
    """The ``whpk_…`` public key of a ``whsk_…`` private key."""
    return PUBLIC_KEY_PREFIX + base64.b64encode(_public_bytes(_private_key(secret))).decode()


def public_keys(secrets: str | None) -> list[str]:
    """The public keys of the ed25519 keys among space-separated secrets, in their order."""
    return [public_key_of(s) for s in (secrets or "").split() if s.startswith(PRIVATE_KEY_PREFIX)]


Sign = Callable[[bytes], str]  # the signed content → one signature entry


def _hmac_signer(key: bytes) -> Sign:
    # A keyed state made once and copied per message: half the time of hmac.digest, and it
    # keeps the GIL for small bodies, where hmac.digest always releases it and then waits
    # (up to the 5 ms switch interval) for the SQLite writer thread to hand it back.
    keyed = hmac.new(key, digestmod="sha256")

    def sign(content: bytes) -> str:
        mac = keyed.copy()
        mac.update(content)
        return "v1," + base64.b64encode(mac.digest()).decode()

    return sign


def _ed25519_signer(key: Ed25519PrivateKey) -> Sign:
    return lambda content: "v1a," + base64.b64encode(key.sign(content)).decode()


def _signer_of(secret: str) -> Sign:
    if secret.startswith(PRIVATE_KEY_PREFIX):
        return _ed25519_signer(_private_key(secret))
    return _hmac_signer(decode_secret(secret))


class Signer:
    def __init__(self, secrets: list[str]) -> None:
        if not secrets:
            raise ConfigError("at least one signing secret is required")
        self._signs = [_signer_of(s) for s in secrets]
        self.public_keys = public_keys(" ".join(secrets))

    def signature(self, msg_id: str, timestamp: int, body: bytes) -> str:
        signed = f"{msg_id}.{timestamp}.".encode() + body
        return " ".join(sign(signed) for sign in self._signs)

    def headers(self, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": self.signature(msg_id, timestamp, body),
        }
