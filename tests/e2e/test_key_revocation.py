"""DESIGN: a revoked API key is refused by every process within 1 s. Two `workly serve`
processes over one PostgreSQL database: the key is used on the second (so it remembers it),
revoked through the first, and the second is asked until it refuses."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import drop_workly_env, serve_args
from tests.support.servers import AUTH, TEST_SECRET, TEST_SERVER_ENV, free_port, workly_process

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


async def test_a_revoked_key_is_refused_by_every_process_within_a_second(
    pg_fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV, "WORKLY_DATABASE_URL": pg_fresh_db}
    with contextlib.ExitStack() as stack:
        first, second = (
            stack.enter_context(workly_process(serve_args(port), env, port, tmp_path / f"{port}.log"))
            for port in (free_port(), free_port())
        )
        async with httpx.AsyncClient(timeout=10) as http:
            made = await http.post(f"{first}/v1/keys", json={"name": "ci", "role": "reader"}, headers=AUTH)
            assert made.status_code == 201, made.text
            key = {"authorization": f"Bearer {made.json()['key']}"}
            assert (await http.get(f"{second}/v1/queues", headers=key)).status_code == 200
            revoked = await http.delete(f"{first}/v1/keys/{made.json()['id']}", headers=AUTH)
            assert revoked.status_code == 204
            revoked_at = time.monotonic()
            while True:
                asked_at = time.monotonic()
                status = (await http.get(f"{second}/v1/queues", headers=key)).status_code
                if status == 401:
                    break
                assert status == 200 and asked_at - revoked_at < 5, status
            # The first request the second process refused was sent within a second of the
            # revocation (it remembers a key for at most half of one).
            assert asked_at - revoked_at <= 1.0, asked_at - revoked_at
