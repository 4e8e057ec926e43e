"""Signing secrets encrypted at rest (WORKLY_SECRET_KEY; docs/security.md).

With a key set, a queue's or endpoint's signing secret is stored as ``wkenc1:`` + base64url of
(the key's 4-byte id, a 12-byte nonce, the AES-256-GCM ciphertext and tag): whoever reads the
database (a backup, a replica, a stolen SQLite file) gets no secret without the key. Several
keys may be given, space separated: the first seals, every one opens, so a key is rotated by
putting the new one first, running `workly secret-key reseal`, then dropping the old one.
Without a key, secrets are stored as given (and sealed ones cannot be opened: ConfigError).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from workly.errors import ConfigError

PREFIX = "wkenc1:"
_KEY_ID = 4
_NONCE = 12
_MAX_OPENED = 10_000


def parse_keys(value: str | None) -> list[bytes]:
    """WORKLY_SECRET_KEY: base64 of 32 random bytes, several space separated; ConfigError
    for one that is not."""
    keys = []
    for position, text in enumerate((value or "").split(), start=1):
        try:
            key = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != 32:
            raise ConfigError(
                f"WORKLY_SECRET_KEY: key {position} is not the base64 of 32 bytes "
                "(`workly secret-key new` prints one)"
            )
        keys.append(key)
    return keys


class SecretBox:
    def __init__(self, keys: list[bytes]) -> None:
        # Imported here: only a process that encrypts pays for loading OpenSSL's bindings.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._keys = {hashlib.sha256(key).digest()[:_KEY_ID]: AESGCM(key) for key in keys}
        self._sealing = next(iter(self._keys.items()), None)
        self._opened: dict[str, str] = {}

    @property
    def seals(self) -> bool:
        return self._sealing is not None

    def seal(self, secret: str | None) -> str | None:
        """The secret as stored: sealed with the first key (as given without one, or when it
        is sealed already)."""
        if secret is None or self._sealing is None or secret.startswith(PREFIX):
            return secret
        key_id, aead = self._sealing
        nonce = os.urandom(_NONCE)
        sealed = aead.encrypt(nonce, secret.encode(), PREFIX.encode())
        return PREFIX + base64.urlsafe_b64encode(key_id + nonce + sealed).decode()

    def current(self, stored: str | None) -> bool:
        """Stored as seal would store it now: sealed with the first key (or, without a key,
        not sealed)."""
        if stored is None:
            return True
        if self._sealing is None:
            return not stored.startswith(PREFIX)
        if not stored.startswith(PREFIX):
            return False
        try:
            key_id = base64.urlsafe_b64decode(stored[len(PREFIX) :])[:_KEY_ID]
        except (binascii.Error, ValueError):
            return False
        return key_id == self._sealing[0]

    def reseal(self, stored: str | None) -> str | None:
        """A stored secret sealed with the first key (opened with whichever key sealed it)."""
        return stored if self.current(stored) else self.seal(self.open(stored))

    def open(self, stored: str | None) -> str | None:
        """A stored secret as given: sealed ones opened (remembered: a claim's secret is opened
        once per process, not per delivery), others as they are."""
        if stored is None or not stored.startswith(PREFIX):
            return stored
        opened = self._opened.get(stored)
        if opened is None:
            opened = self._open(stored)
            if len(self._opened) >= _MAX_OPENED:
                self._opened.clear()
            self._opened[stored] = opened
        return opened

    def _open(self, stored: str) -> str:
        from cryptography.exceptions import InvalidTag

        try:
            raw = base64.urlsafe_b64decode(stored[len(PREFIX) :])
        except (binascii.Error, ValueError):
            raise ConfigError("a stored signing secret is damaged (not base64)") from None
        aead = self._keys.get(raw[:_KEY_ID])
        if aead is None:
            raise ConfigError(
                "a stored signing secret was sealed with a key WORKLY_SECRET_KEY does not hold: "
                "give that key too (space separated)"
            )
        try:
            return aead.decrypt(
                raw[_KEY_ID : _KEY_ID + _NONCE], raw[_KEY_ID + _NONCE :], PREFIX.encode()
            ).decode()
        except InvalidTag:
            raise ConfigError(
                "a stored signing secret does not open with its key (damaged or altered)"
            ) from None
