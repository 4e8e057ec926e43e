"""`workly doctor`: what it says of missing settings, a database to migrate, an unreachable one,
a short token; that it changes nothing; and the clock check against a real PostgreSQL. The
command runs in-process (tests/e2e/cli.py), from the test's folder, with only the WORKLY_*
variables the test gives; the first test runs the real `python -m workly doctor`."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from tests.e2e.cli import completed
from tests.e2e.conftest import clean_env
from tests.support.servers import TEST_SECRET, TEST_TOKEN
from workly.config import Settings
from workly.ids import new_task_id
from workly.models import NewTask
from workly.service.assembly import open_configured_storage
from workly.service.doctor import check_database
from workly.storage.factory import open_storage

pytestmark = pytest.mark.e2e


def doctor(cwd: Path, command: str = "doctor", **env: str) -> subprocess.CompletedProcess[str]:
    """`workly <command>` (doctor, unless told), in-process."""
    return completed([command], cwd, env)


def doctor_process(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m workly doctor`, the real entry point, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "workly", "doctor"], env=clean_env(**env), cwd=cwd,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def lines(result: subprocess.CompletedProcess[str], level: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(f"{level} ")]


def test_without_settings_it_names_what_serve_needs(tmp_path: Path) -> None:
    result = doctor_process(tmp_path)
    assert result.returncode == 1, result
    failed = "\n".join(lines(result, "fail"))
    for needed in ("WORKLY_DATABASE_URL", "WORKLY_SIGNING_SECRET", "WORKLY_API_TOKENS"):
        assert needed in failed
    assert "3 to fix" in result.stdout


def test_a_token_serve_would_refuse_is_a_failure_never_shown(tmp_path: Path) -> None:
    result = doctor(
        tmp_path, WORKLY_SIGNING_SECRET=TEST_SECRET, WORKLY_API_TOKENS=f"{TEST_TOKEN} short-secret"
    )
    assert result.returncode == 1, result
    [failed] = [line for line in lines(result, "fail") if "tokens" in line]
    assert "token(s) [2]" in failed and "under 32 characters" in failed and "refuses" in failed
    assert "short-secret" not in result.stdout + result.stderr


def test_invalid_settings_are_each_named(tmp_path: Path) -> None:
    result = doctor(tmp_path, WORKLY_DATABASE_URL="mysql://x", WORKLY_POLL_INTERVAL="soon")
    assert result.returncode == 1
    failed = "\n".join(lines(result, "fail"))
    assert "WORKLY_DATABASE_URL" in failed and "WORKLY_POLL_INTERVAL" in failed


@pytest.mark.postgres
def test_an_unmigrated_postgres_database_is_said_and_left_as_it_was(tmp_path: Path, pg_fresh_db: str) -> None:
    env = {
        "WORKLY_DATABASE_URL": pg_fresh_db,
        "WORKLY_SIGNING_SECRET": TEST_SECRET,
        "WORKLY_API_TOKENS": TEST_TOKEN,
    }
    result = doctor(tmp_path, **env)
    assert result.returncode == 0, result  # nothing that stops a server: it migrates as it starts
    warned = "\n".join(lines(result, "warn"))
    assert "schema version 0 in schema public" in warned and "`workly migrate`" in warned
    assert any(line.startswith("ok    clock") for line in result.stdout.splitlines())

    async def tables() -> int:
        conn = await asyncpg.connect(pg_fresh_db)
        try:
            found: int = await conn.fetchval(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            )
            return found
        finally:
            await conn.close()

    assert asyncio.run(tables()) == 0  # the doctor made nothing


def test_a_migrated_sqlite_database_is_all_good(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'w.db'}"
    env = {"WORKLY_DATABASE_URL": db, "WORKLY_SIGNING_SECRET": TEST_SECRET, "WORKLY_API_TOKENS": TEST_TOKEN}
    assert doctor(tmp_path, **env).returncode == 0  # a file that does not exist yet: only a warning
    assert not (tmp_path / "w.db").exists()
    migrated = doctor(tmp_path, "migrate", **env)
    assert migrated.returncode == 0, migrated
    result = doctor(tmp_path, **env)
    assert (result.returncode, lines(result, "warn"), lines(result, "fail")) == (0, [], []), result.stdout
    assert "up to date" in result.stdout and result.stdout.strip().endswith("all good")


def test_counts_that_disagree_with_the_tasks_are_said_and_recount_mends_them(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    env = {"WORKLY_DATABASE_URL": f"sqlite:///{db}", "WORKLY_SIGNING_SECRET": TEST_SECRET,
           "WORKLY_API_TOKENS": TEST_TOKEN}  # fmt: skip

    async def enqueue() -> None:
        storage = await open_storage(env["WORKLY_DATABASE_URL"])
        try:
            await storage.database.migrate()
            tasks = [NewTask(id=new_task_id(), queue=q, url="http://127.0.0.1:9/") for q in ("a", "b", "b")]
            await storage.tasks.enqueue(tasks, datetime.now(UTC))
        finally:
            await storage.close()

    asyncio.run(enqueue())
    assert lines(doctor(tmp_path, **env), "warn") == []
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DELETE FROM task_counts WHERE queue = 'b'")  # as a restore with triggers off leaves them
    conn.close()
    [warned] = lines(doctor(tmp_path, **env), "warn")
    assert "task counts of b disagree" in warned and "`workly recount`" in warned
    recounted = doctor(tmp_path, "recount", **env)
    assert recounted.returncode == 0
    assert recounted.stdout.strip() == "counted the tasks again; they were wrong for b"
    assert lines(doctor(tmp_path, **env), "warn") == []


def test_recount_wants_a_migrated_database(tmp_path: Path) -> None:
    env = {"WORKLY_DATABASE_URL": f"sqlite:///{tmp_path / 'w.db'}", "WORKLY_SIGNING_SECRET": TEST_SECRET,
           "WORKLY_API_TOKENS": TEST_TOKEN}  # fmt: skip
    result = doctor(tmp_path, "recount", **env)
    assert result.returncode == 2 and "`workly migrate` first" in result.stderr, result
    assert "Traceback" not in result.stderr


def test_an_unreachable_database_is_a_failure(tmp_path: Path) -> None:
    url = "postgresql://app:hunter2@127.0.0.1:1/never"  # port 1: refused at once
    result = doctor(
        tmp_path, WORKLY_DATABASE_URL=url, WORKLY_SIGNING_SECRET=TEST_SECRET, WORKLY_API_TOKENS=TEST_TOKEN
    )
    assert result.returncode == 1
    [failed] = lines(result, "fail")
    assert "cannot reach postgresql://app:***@127.0.0.1:1/never" in failed and "hunter2" not in result.stdout


@pytest.mark.postgres
async def test_a_clock_apart_from_the_databases_is_a_warning(pg_url: str) -> None:
    settings = Settings(database_url=pg_url, signing_secret=TEST_SECRET, api_tokens=TEST_TOKEN)
    findings = await check_database(
        settings, open_configured_storage, now=datetime.now(UTC) + timedelta(seconds=30)
    )
    [clock] = [f for f in findings if f.topic == "clock"]
    skew = float(clock.text.split("differ by ")[1].split(" s")[0])
    assert clock.level == "warn" and 29 < skew < 31, clock


@pytest.mark.postgres
def test_an_install_in_another_schema_is_a_failure_as_serve_refuses_it(
    tmp_path: Path, pg_fresh_db: str
) -> None:
    env = {"WORKLY_DATABASE_URL": pg_fresh_db, "WORKLY_SIGNING_SECRET": TEST_SECRET,
           "WORKLY_API_TOKENS": TEST_TOKEN}  # fmt: skip
    assert doctor(tmp_path, "migrate", **env, WORKLY_DATABASE_SCHEMA="other").returncode == 0
    result = doctor(tmp_path, **env)  # no schema configured: serve would refuse to start
    assert result.returncode == 1, result.stdout
    [failed] = lines(result, "fail")
    assert "tables are in schema 'other'" in failed and "WORKLY_DATABASE_SCHEMA=other" in failed
    assert lines(doctor(tmp_path, **env, WORKLY_DATABASE_SCHEMA="other"), "fail") == []


def test_a_sqlite_file_workly_did_not_make_is_said_and_left_as_it_was(tmp_path: Path) -> None:
    other, empty = tmp_path / "other.db", tmp_path / "empty.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (text TEXT)")  # the rollback journal: not a database of Workly's
    conn.commit()
    conn.close()
    empty.touch()
    before = {path: path.read_bytes() for path in (other, empty)}
    for path, said in ((other, "Workly did not make (not in WAL mode)"), (empty, "is empty")):
        result = doctor(tmp_path, WORKLY_DATABASE_URL=f"sqlite:///{path}", WORKLY_SIGNING_SECRET=TEST_SECRET,
                        WORKLY_API_TOKENS=TEST_TOKEN)  # fmt: skip
        assert result.returncode == 0 and said in "\n".join(lines(result, "warn")), result.stdout
    assert {path: path.read_bytes() for path in (other, empty)} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty.db", "other.db"]
