"""`workly secret-key new|reseal` in-process (tests/e2e/cli.py), on a SQLite database of the
test's own; bad configuration is one line and exit 2, as for every server command."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.cli import completed
from tests.support.servers import TEST_SECRET

pytestmark = pytest.mark.e2e


def test_new_prints_a_key_of_32_random_bytes(tmp_path: Path) -> None:
    first, second = (completed(["secret-key", "new"], tmp_path, {}) for _ in range(2))
    assert first.returncode == 0 and len(base64.b64decode(first.stdout.strip(), validate=True)) == 32
    assert first.stdout != second.stdout


def test_reseal_seals_the_stored_secrets_and_refuses_bad_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    key = completed(["secret-key", "new"], tmp_path, {}).stdout.strip()
    env = {"WORKLY_DATABASE_URL": url, "WORKLY_SIGNING_SECRET": TEST_SECRET}
    missing = completed(["secret-key", "reseal"], tmp_path, env)
    assert missing.returncode == 2 and "WORKLY_SECRET_KEY is not set" in missing.stderr
    bad = completed(["secret-key", "reseal"], tmp_path, {**env, "WORKLY_SECRET_KEY": "not-a-key"})
    assert bad.returncode == 2 and "invalid WORKLY_SECRET_KEY" in bad.stderr and "key 1" in bad.stderr
    assert "not-a-key" not in bad.stderr
    assert completed(["migrate"], tmp_path, env).returncode == 0
    db = sqlite3.connect(tmp_path / "w.db")
    db.execute(
        "INSERT INTO queues (name, signing_secret, created_at, updated_at) VALUES ('q', ?, 0, 0)",
        (TEST_SECRET,),
    )
    db.commit()
    done = completed(["secret-key", "reseal"], tmp_path, {**env, "WORKLY_SECRET_KEY": key})
    assert done.returncode == 0 and "resealed 1 signing secret(s)" in done.stdout, done
    [stored] = db.execute("SELECT signing_secret FROM queues WHERE name = 'q'").fetchone()
    assert stored.startswith("wkenc1:") and TEST_SECRET not in stored
    db.close()
