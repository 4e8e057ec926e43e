"""SecretBox (pure): sealing, opening, rotation, and what it refuses."""

from __future__ import annotations

import base64
import os

import pytest

from workly.errors import ConfigError
from workly.secret_box import PREFIX, SecretBox, parse_keys

OLD, NEW = os.urandom(32), os.urandom(32)
SECRET = "whsec_" + base64.b64encode(b"k" * 24).decode()


def test_a_sealed_secret_opens_only_with_its_key_and_never_shows_it() -> None:
    box = SecretBox([OLD])
    sealed = box.seal(SECRET)
    assert sealed is not None and sealed.startswith(PREFIX) and "whsec_" not in sealed
    assert box.seal(SECRET) != sealed  # a fresh nonce each time
    assert box.open(sealed) == SECRET and SecretBox([OLD]).open(sealed) == SECRET
    with pytest.raises(ConfigError, match="does not hold"):
        SecretBox([NEW]).open(sealed)
    with pytest.raises(ConfigError, match="does not hold"):
        SecretBox([]).open(sealed)


def test_without_a_key_secrets_are_kept_as_given() -> None:
    box = SecretBox([])
    assert box.seal(SECRET) == SECRET and box.open(SECRET) == SECRET
    assert box.seal(None) is None and box.open(None) is None and box.current(SECRET)


def test_a_rotation_reseals_with_the_first_key() -> None:
    sealed_old = SecretBox([OLD]).seal(SECRET)
    rotating = SecretBox([NEW, OLD])
    assert rotating.open(sealed_old) == SECRET and not rotating.current(sealed_old)
    resealed = rotating.reseal(sealed_old)
    assert resealed is not None and rotating.current(resealed) and rotating.reseal(resealed) == resealed
    assert SecretBox([NEW]).open(resealed) == SECRET  # the old key can go now
    assert (
        rotating.reseal(SECRET) != SECRET and rotating.open(rotating.reseal(SECRET)) == SECRET
    )  # plain: sealed


@pytest.mark.parametrize("damage", [lambda s: s[:-4] + "AAAA", lambda s: s[:20], lambda s: PREFIX + "!!!"])
def test_an_altered_secret_is_refused(damage: object) -> None:
    box = SecretBox([OLD])
    sealed = box.seal(SECRET)
    assert sealed is not None and callable(damage)
    with pytest.raises(ConfigError):
        box.open(damage(sealed))


@pytest.mark.parametrize(
    "value", ["short", base64.b64encode(b"x" * 31).decode(), "not base64 !", "AAAA" * 11 + "="]
)
def test_a_key_that_is_not_32_bytes_of_base64_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="WORKLY_SECRET_KEY: key 1"):
        parse_keys(value)
    assert len(parse_keys(f"{base64.b64encode(NEW).decode()} {base64.b64encode(OLD).decode()}")) == 2
    assert parse_keys(None) == [] and parse_keys("") == []
