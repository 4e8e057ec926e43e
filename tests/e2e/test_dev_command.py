"""`workly dev`: SQLite, and a signing secret taken from the environment or made once and kept."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import POLL_INTERVAL, dev_args, drop_workly_env, enqueue, wait_for_status
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET, free_port, workly_process
from workly.signing import decode_secret

pytestmark = pytest.mark.e2e

PRINTED_SECRET = re.compile(r"^workly dev: signing secret (\S+)$", re.MULTILINE)


def printed_secret(log: Path) -> str:
    found = PRINTED_SECRET.findall(log.read_text(errors="replace"))
    assert len(found) == 1, f"expected the signing secret printed once:\n{log.read_text(errors='replace')}"
    secret: str = found[0]
    return secret


async def delivered_and_verified(base_url: str, secret: str, path: str) -> None:
    """A task delivered by this server verifies against ``secret``."""
    async with running_receiver(secret) as receiver, httpx.AsyncClient(base_url=base_url) as client:
        task = await enqueue(client, "dev", {"url": receiver.url(path), "body": {"path": path}})
        await wait_for_status(client, task["id"], "succeeded")
        [delivery] = receiver.at(path)
        assert delivery.verified is True


async def test_dev_generates_a_secret_once_prints_it_and_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)  # no WORKLY_SIGNING_SECRET: dev must make one
    db = tmp_path / "state" / "workly.db"
    secret_file = tmp_path / "state" / "workly.db.signing-secret"
    env = {"WORKLY_POLL_INTERVAL": POLL_INTERVAL}

    port = free_port()
    with workly_process(dev_args(db, port), env, port, tmp_path / "first.log") as base_url:
        first = printed_secret(tmp_path / "first.log")  # printed while running, not only at exit
        assert secret_file.read_text().strip() == first
        assert len(decode_secret(first)) >= 16
        assert stat.S_IMODE(secret_file.stat().st_mode) & 0o077 == 0, "the secret file is readable by others"
        await delivered_and_verified(base_url, first, "/first")
    assert db.exists()

    port = free_port()
    with workly_process(dev_args(db, port), env, port, tmp_path / "second.log") as base_url:
        second = printed_secret(tmp_path / "second.log")
        await delivered_and_verified(base_url, second, "/second")
    assert second == first
    assert secret_file.read_text().strip() == first


async def test_dev_uses_the_secret_from_the_environment_and_stores_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    db = tmp_path / "workly.db"
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, "WORKLY_POLL_INTERVAL": POLL_INTERVAL}
    port = free_port()
    with workly_process(dev_args(db, port), env, port, tmp_path / "dev.log") as base_url:
        assert printed_secret(tmp_path / "dev.log") == TEST_SECRET
        await delivered_and_verified(base_url, TEST_SECRET, "/env")
    assert not (tmp_path / "workly.db.signing-secret").exists()


async def test_dev_ignores_a_database_url_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--db` decides: a WORKLY_DATABASE_URL left in the shell must not redirect `workly dev`."""
    drop_workly_env(monkeypatch)
    db = tmp_path / "chosen.db"
    elsewhere = tmp_path / "elsewhere.db"
    env = {
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        "WORKLY_POLL_INTERVAL": POLL_INTERVAL,
        "WORKLY_DATABASE_URL": f"sqlite:///{elsewhere}",
    }
    port = free_port()
    with workly_process(dev_args(db, port), env, port, tmp_path / "dev.log") as base_url:
        await delivered_and_verified(base_url, TEST_SECRET, "/db")
    assert db.exists()
    assert not elsewhere.exists()
