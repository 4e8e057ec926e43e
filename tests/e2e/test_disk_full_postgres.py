"""A full disk under `workly serve`: Workly's database in a tablespace on an 8 MiB tmpfs, filled up.

The test starts a PostgreSQL cluster of its own (tools/soak/cluster.py) whose data directory,
and so its WAL, stays on the normal disk: a full pg_wal makes PostgreSQL PANIC, another case
(docs/reliability.md). Workly's database is created with the tmpfs's tablespace as its default,
so its tables, indexes, catalogs and temporary files are written there. With the tmpfs full,
enqueues answer 503 with a problem that says the disk is full (PostgreSQL's `disk_full`,
SQLSTATE 53100: "could not extend file ...: No space left on device"), nothing acknowledged
is lost, the server stays up, and once space is freed enqueues succeed again with no restart.

The tmpfs is mounted and unmounted by the test (root, as CI runs); the server is stopped by
PID and the cluster stopped and removed before the unmount, whatever happens.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.e2e.conftest import drop_workly_env, serve_args
from tests.e2e.test_disk_full import enqueue_until_refused, fill
from tests.support.servers import AUTH, TEST_SECRET, TEST_SERVER_ENV, free_port, workly_process
from tools.soak.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]
DISK_SIZE = "8m"  # a new database with Workly's tables takes some 3 MiB of it


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def mount_tmpfs(disk: Path, options: str) -> str | None:
    """Mount a tmpfs on ``disk``: None once it is, else why it is not."""
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(disk)], capture_output=True, text=True
        )
    except FileNotFoundError:
        return "no mount command"
    if mounted.returncode != 0:
        return mounted.stderr.strip() or f"mount exited with {mounted.returncode}"
    return None


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A tmpfs owned by the server's user, mounted on a directory it can reach (under /tmp,
    not under pytest's root-only tmp_path)."""
    try:
        server_user = pwd.getpwnam("postgres")
    except KeyError:
        server_user = None
    refusal = "mounting a tmpfs needs root" if os.geteuid() != 0 else None
    if refusal is None and server_user is None:
        refusal = "no postgres user to run a cluster of the test's own as"
    disk = Path(tempfile.mkdtemp(prefix="workly-small-disk-"))
    if refusal is None and server_user is not None:
        owner = f"uid={server_user.pw_uid},gid={server_user.pw_gid}"
        refusal = mount_tmpfs(disk, f"size={DISK_SIZE},mode=0700,{owner}")
    if refusal is not None:
        disk.rmdir()
        reason = f"cannot mount a tmpfs for a tablespace here: {refusal}"
        if in_ci():
            pytest.fail(reason)  # CI runs as root: the test must run there
        pytest.skip(reason)
    try:
        yield disk
    finally:
        unmounted = subprocess.run(["umount", "-l", str(disk)], capture_output=True, text=True)
        if unmounted.returncode == 0:
            disk.rmdir()
        assert unmounted.returncode == 0, f"the tmpfs is still mounted at {disk}: {unmounted.stderr}"


@pytest.fixture
def cluster(small_disk: Path) -> Iterator[Cluster]:
    """Depends on small_disk so that it is removed before the tmpfs is unmounted."""
    try:
        own = Cluster()
    except LookupError:
        if in_ci():
            raise
        pytest.skip("no PostgreSQL server binaries to start a cluster of the test's own")
    try:
        own.start()
        yield own
    finally:
        own.remove()


async def create_database_on(server_url: str, disk: Path) -> str:
    """A database ``w`` whose default tablespace is on ``disk``; its URL."""
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f"CREATE TABLESPACE small LOCATION '{disk}'")
        await conn.execute("CREATE DATABASE w TABLESPACE small")
    finally:
        await conn.close()
    return server_url.rsplit("/", 1)[0] + "/w"


def a_task() -> dict[str, object]:
    # Random text does not compress: every task takes its room (a paused queue: never sent).
    return {"url": "http://127.0.0.1:9/never", "body": {"pad": os.urandom(1500).hex()}}


def test_a_full_tablespace_refuses_enqueues_with_503_loses_nothing_and_recovers(
    cluster: Cluster, small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop_workly_env(monkeypatch)
    database_url = asyncio.run(create_database_on(cluster.url, small_disk))
    port, log = free_port(), tmp_path / "workly.log"
    env = {"WORKLY_DATABASE_URL": database_url, "WORKLY_SIGNING_SECRET": TEST_SECRET, **TEST_SERVER_ENV}
    with (
        workly_process(serve_args(port), env, port, log) as base,
        httpx.Client(base_url=base, headers=AUTH, timeout=10) as api,
    ):
        assert api.put("/v1/queues/q", json={"paused": True}).status_code == 201
        acknowledged = [api.post("/v1/queues/q/tasks", json=a_task()).json()["id"] for _ in range(3)]

        filler = fill(small_disk)
        refused = enqueue_until_refused(api, a_task, acknowledged, 200)
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert "disk the database writes to is full" in refused.json()["detail"]
        # PostgreSQL's own words reach the log: a disk_full (53100) error, not another one.
        assert "a disk PostgreSQL writes to is full" in log.read_text(errors="replace")
        assert api.get("/health/live").status_code == 200

        filler.unlink()
        again = api.post("/v1/queues/q/tasks", json=a_task())
        assert again.status_code == 201, again.text
        acknowledged.append(again.json()["id"])

        for task_id in acknowledged:
            assert api.get(f"/v1/tasks/{task_id}").json()["status"] == "ready"
        assert api.get("/v1/queues/q").json()["counts"]["ready"] == len(acknowledged)
