"""A full disk under `workly dev`: the database on a 4 MiB tmpfs of the test's own, filled up.

Enqueues answer 503 with a problem that says the disk is full, nothing acknowledged is lost,
the server stays up, and once space is freed enqueues succeed again with no restart. The
tmpfs is mounted and unmounted by the test (root, as CI runs); the server is stopped by PID
before the unmount.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import dev_args, drop_workly_env
from tests.support.servers import AUTH, TEST_SECRET, TEST_SERVER_ENV, free_port, workly_process

pytestmark = pytest.mark.e2e
TASK = {"url": "http://127.0.0.1:9/never", "body": {"pad": "x" * 3000}}  # a paused queue: never sent


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
            capture_output=True,
            text=True,
            check=False,
        )
        refusal = mounted.stderr.strip() if mounted.returncode != 0 else None
    except FileNotFoundError:
        refusal = "no mount command"
    if refusal is not None:
        reason = f"cannot mount a tmpfs here: {refusal}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)  # CI runs as root: the test must run there
        pytest.skip(reason)
    try:
        yield disk
    finally:
        unmounted = subprocess.run(["umount", "-l", str(disk)], capture_output=True, text=True, check=False)
        assert unmounted.returncode == 0, f"the test's tmpfs is still mounted at {disk}: {unmounted.stderr}"


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as out:  # unbuffered: no bytes left over to fail at close
        try:
            while True:
                out.write(chunk)
        except OSError:
            pass
    return filler


def enqueue_until_refused(
    api: httpx.Client, task: Callable[[], dict[str, object]], acknowledged: list[str], most: int
) -> httpx.Response:
    """Enqueue ``task()`` until an answer is not 201 (that answer), at most ``most`` times: a
    full disk still takes a few in the room the database's pages already have. The ids of
    those taken are added to ``acknowledged``."""
    for _ in range(most):
        answer = api.post("/v1/queues/q/tasks", json=task())
        if answer.status_code != 201:
            return answer
        acknowledged.append(answer.json()["id"])
    raise AssertionError(f"{most} enqueues fitted on a full disk")


def test_a_full_disk_refuses_enqueues_with_503_loses_nothing_and_recovers(
    small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    port = free_port()
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV}
    with (
        workly_process(dev_args(small_disk / "w.db", port), env, port, tmp_path / "workly.log") as base,
        httpx.Client(base_url=base, headers=AUTH, timeout=10) as api,
    ):
        assert api.put("/v1/queues/q", json={"paused": True}).status_code == 201
        acknowledged = [api.post("/v1/queues/q/tasks", json=TASK).json()["id"] for _ in range(3)]

        filler = fill(small_disk)
        refused = enqueue_until_refused(api, lambda: TASK, acknowledged, 50)
        assert refused.status_code == 503
        assert refused.headers["content-type"] == "application/problem+json"
        assert "disk the database writes to is full" in refused.json()["detail"]
        assert api.get("/health/live").status_code == 200

        filler.unlink()
        again = api.post("/v1/queues/q/tasks", json=TASK)
        assert again.status_code == 201, again.text
        acknowledged.append(again.json()["id"])

        for task_id in acknowledged:
            assert api.get(f"/v1/tasks/{task_id}").json()["status"] == "ready"
        assert api.get("/v1/queues/q").json()["counts"]["ready"] == len(acknowledged)
