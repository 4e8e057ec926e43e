"""The CLI refuses bad configuration with exit code 2 and a one-line reason; `migrate` is idempotent.

Each run gets an environment without the parent's WORKLY_* variables, so only what the
test sets counts. None of these ever reaches the point of listening: the commands run
in-process (tests/e2e/cli.py), from the test's folder. The real `python -m workly` is run where
the entry point is what is shown: a refusal's exit status and its one line, a database that
cannot be reached (exit 3), and a server that serves once it says it listens.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.cli import completed
from tests.e2e.conftest import clean_env
from tests.support.servers import TEST_SECRET, TEST_TOKEN, free_port
from workly import __version__
from workly.cli.checks import only_loopback

pytestmark = pytest.mark.e2e

Completed = subprocess.CompletedProcess[str]
PG_URL = "postgresql://postgres@127.0.0.1:1/never_connected"  # never reached: config fails first


def workly(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`workly <args>` in-process, from ``cwd``, with ``env`` as its only WORKLY_* variables."""
    return completed(args, cwd, env)


def process(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m workly <args>`, the real entry point, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "workly", *args],
        env=clean_env(**env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def serve(cwd: Path, *extra: str, run: Callable[..., Completed] = workly, **env: str) -> Completed:
    env = {"WORKLY_API_TOKENS": TEST_TOKEN, **env}
    return run("serve", "--host", "127.0.0.1", "--port", str(free_port()), *extra, cwd=cwd, **env)


def assert_refused(result: subprocess.CompletedProcess[str], *mentions: str) -> str:
    """Exit 2, one line on stderr naming each of ``mentions``, no traceback."""
    assert result.returncode == 2, f"exit {result.returncode}\nstdout:{result.stdout}\nstderr:{result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line reason, got:\n{result.stderr}"
    for mention in mentions:
        assert mention in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def test_serve_without_database_url(tmp_path: Path) -> None:
    result = serve(tmp_path, WORKLY_SIGNING_SECRET=TEST_SECRET)
    assert_refused(result, "WORKLY_DATABASE_URL")


def test_serve_without_signing_secret(tmp_path: Path) -> None:
    result = serve(tmp_path, WORKLY_DATABASE_URL=PG_URL)
    assert_refused(result, "WORKLY_SIGNING_SECRET")


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param("not-a-secret", id="no-prefix"),
        pytest.param("whsec_***not base64***", id="bad-base64"),
        pytest.param("whsec_c2hvcnQ=", id="too-short"),
        pytest.param(f"{TEST_SECRET} whsec_", id="second-of-two-empty"),
        pytest.param(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSé",
            id="non-ascii",
        ),
    ],
)
def test_serve_with_a_malformed_signing_secret(tmp_path: Path, secret: str) -> None:
    result = serve(tmp_path, WORKLY_DATABASE_URL=PG_URL, WORKLY_SIGNING_SECRET=secret)
    assert_refused(result, "WORKLY_SIGNING_SECRET")


def test_serve_with_an_unknown_database_scheme(tmp_path: Path) -> None:
    result = serve(tmp_path, WORKLY_DATABASE_URL="mysql://db/x", WORKLY_SIGNING_SECRET=TEST_SECRET)
    assert_refused(result, "WORKLY_DATABASE_URL")


def test_serve_refuses_several_workers_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "workly.db"
    result = serve(
        tmp_path, "--workers", "2", WORKLY_DATABASE_URL=f"sqlite:///{db}", WORKLY_SIGNING_SECRET=TEST_SECRET
    )
    reason = assert_refused(result, "SQLite")
    assert "workers" in reason
    assert not db.exists()


def test_dev_with_a_malformed_signing_secret(tmp_path: Path) -> None:
    args = ["dev", "--db", str(tmp_path / "w.db"), "--port", str(free_port())]
    result = workly(*args, cwd=tmp_path, WORKLY_SIGNING_SECRET="whsec_nope")
    assert_refused(result, "WORKLY_SIGNING_SECRET")


@pytest.mark.postgres
def test_migrate_applies_then_reports_up_to_date(tmp_path: Path, pg_fresh_db: str) -> None:
    first = workly("migrate", cwd=tmp_path, WORKLY_DATABASE_URL=pg_fresh_db)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("applied ")
    assert "up to date" not in first.stdout

    second = workly("migrate", cwd=tmp_path, WORKLY_DATABASE_URL=pg_fresh_db)
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("up to date")
    version = first.stdout.split("schema version ", 1)[1].split(" ", 1)[0]
    assert second.stdout.strip() == f"up to date (version {version} in schema public)"


def test_migrate_without_database_url(tmp_path: Path) -> None:
    assert_refused(workly("migrate", cwd=tmp_path), "WORKLY_DATABASE_URL")


def test_migrate_against_an_unreachable_database_names_it_without_the_password(tmp_path: Path) -> None:
    url = "postgresql://app:hunter2@127.0.0.1:1/never_connected"  # port 1: refused at once
    reason = assert_refused(workly("migrate", cwd=tmp_path, WORKLY_DATABASE_URL=url), "cannot migrate")
    assert "hunter2" not in reason
    assert "app:***@127.0.0.1:1" in reason


def test_dev_with_an_empty_stored_secret(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    (tmp_path / "w.db.signing-secret").write_text("")
    result = workly("dev", "--db", str(db), "--port", str(free_port()), cwd=tmp_path)
    assert_refused(result, "w.db.signing-secret", "empty")


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_a_lease_margin_too_short_for_the_database_timeout_is_refused(tmp_path: Path, command: str) -> None:
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, "WORKLY_LEASE_MARGIN": "20", "WORKLY_DB_TIMEOUT": "10"}
    if command == "serve":
        result = serve(tmp_path, WORKLY_DATABASE_URL=PG_URL, **env)
    else:
        db = tmp_path / "never.db"
        result = workly("dev", "--db", str(db), "--port", str(free_port()), cwd=tmp_path, **env)
        assert not list(tmp_path.iterdir())  # refused before any file was written
    line = assert_refused(result, "WORKLY_LEASE_MARGIN", "WORKLY_DB_TIMEOUT")
    assert "20 s" in line and "10 s" in line


def test_serve_without_api_tokens(tmp_path: Path) -> None:
    result = serve(
        tmp_path, WORKLY_DATABASE_URL=PG_URL, WORKLY_SIGNING_SECRET=TEST_SECRET, WORKLY_API_TOKENS=""
    )
    assert_refused(result, "WORKLY_API_TOKENS")


@pytest.mark.parametrize("command", ["serve", "dev"])
def test_a_bad_outbound_allow_list_is_refused(tmp_path: Path, command: str) -> None:
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, "WORKLY_OUTBOUND_ALLOW": "10.0.0.0/8 not-a-network"}
    if command == "serve":
        result = serve(tmp_path, WORKLY_DATABASE_URL=PG_URL, **env)
    else:
        result = workly(
            "dev", "--db", str(tmp_path / "w.db"), "--port", str(free_port()), cwd=tmp_path, **env
        )
    assert "not-a-network" in assert_refused(result, "WORKLY_OUTBOUND_ALLOW")


@pytest.mark.parametrize(
    ("setting", "value", "mention"),
    [
        ("WORKLY_OUTBOUND_PROXY", "https://proxy.internal:443", "must be an http:// URL"),
        ("WORKLY_OUTBOUND_PROXY", "http://proxy.internal:3128/path", "address only"),
        ("WORKLY_OUTBOUND_CA_FILE", "/nonexistent/ca.pem", "no such file"),
        ("WORKLY_OUTBOUND_CLIENT_KEY", "/nonexistent/key.pem", "needs WORKLY_OUTBOUND_CLIENT_CERT"),
    ],
)
@pytest.mark.parametrize("command", ["serve", "dev"])
def test_outbound_settings_that_cannot_be_used(
    tmp_path: Path, command: str, setting: str, value: str, mention: str
) -> None:
    env = {setting: value, "WORKLY_SIGNING_SECRET": TEST_SECRET}
    if command == "serve":
        result = serve(tmp_path, WORKLY_DATABASE_URL=PG_URL, **env)
    else:
        args = ["dev", "--db", str(tmp_path / "w.db"), "--port", str(free_port())]
        result = workly(*args, cwd=tmp_path, **env)
    assert_refused(result, setting, mention)
    assert not (tmp_path / "w.db").exists()


def test_serve_without_any_setting_names_every_missing_one_at_once(tmp_path: Path) -> None:
    result = process("serve", "--port", str(free_port()), cwd=tmp_path)  # the real entry point
    assert_refused(result, "WORKLY_DATABASE_URL", "WORKLY_SIGNING_SECRET", "WORKLY_API_TOKENS")


def test_several_invalid_settings_are_named_at_once(tmp_path: Path) -> None:
    result = workly("migrate", cwd=tmp_path, WORKLY_DATABASE_URL="mysql://x", WORKLY_POLL_INTERVAL="soon")
    assert_refused(result, "WORKLY_DATABASE_URL", "WORKLY_POLL_INTERVAL")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:hunter2@127.0.0.1:1/never_connected",  # port 1: refused at once
        "sqlite:///{tmp}/a-file/workly.db",  # a folder that cannot be made: a file is in the way
    ],
    ids=["postgres refused", "sqlite path blocked"],
)
def test_serve_against_a_database_it_cannot_reach_exits_3_on_one_line(tmp_path: Path, url: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    env = {"WORKLY_DATABASE_URL": url.format(tmp=tmp_path), "WORKLY_SIGNING_SECRET": TEST_SECRET}
    result = serve(tmp_path, run=process, **env)  # the real entry point
    assert result.returncode == 3, result
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("workly: cannot reach the database") and "WORKLY_DATABASE_URL" in line
    assert "hunter2" not in line and "Traceback" not in result.stderr + result.stdout
    assert "listening" not in result.stdout


@pytest.mark.parametrize("command", ["dev", "serve"])
def test_a_port_in_use_is_refused_before_anything_says_it_listens(tmp_path: Path, command: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        if command == "dev":
            result = workly("dev", "--db", str(tmp_path / "w.db"), "--port", port, cwd=tmp_path)
        else:
            db = f"sqlite:///{tmp_path / 'w.db'}"
            result = workly(
                "serve", "--host", "127.0.0.1", "--port", port, cwd=tmp_path,
                WORKLY_DATABASE_URL=db, WORKLY_SIGNING_SECRET=TEST_SECRET, WORKLY_API_TOKENS=TEST_TOKEN,
            )  # fmt: skip
    assert_refused(result, f"cannot listen on 127.0.0.1:{port}", "another --port")
    assert "listening" not in result.stdout
    if command == "dev":  # nothing made for a server that did not start
        assert list(tmp_path.iterdir()) == []


def test_version(tmp_path: Path) -> None:
    result = workly("--version", cwd=tmp_path)
    assert (result.returncode, result.stdout.strip()) == (0, f"workly {__version__}")


@pytest.mark.parametrize("port", ["0", "65536", "99999"])
def test_a_port_out_of_range_is_refused(tmp_path: Path, port: str) -> None:
    result = workly("dev", "--db", str(tmp_path / "w.db"), "--port", port, cwd=tmp_path)
    assert result.returncode == 2 and "Invalid value for '--port'" in result.stderr, result.stderr
    assert "listening" not in result.stdout and not (tmp_path / "w.db").exists()


def test_a_connection_made_as_soon_as_it_says_it_listens_is_served(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "workly", "dev", "--db", str(tmp_path / "w.db"), "--port", str(port)],
        env=clean_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        for line in server.stdout:  # the process ends, or says it listens
            if "listening on" in line:
                break
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:  # not refused
            conn.sendall(b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := conn.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer
    finally:
        server.terminate()
        server.communicate(timeout=30)  # and closes its output


def test_dev_with_a_database_where_no_file_can_be_made(tmp_path: Path) -> None:
    assert_refused(workly("dev", "--db", "/proc/no/such/w.db", "--port", str(free_port()), cwd=tmp_path),
                   "cannot write /proc/no/such/w.db.signing-secret", "--db")  # fmt: skip


@pytest.mark.postgres
def test_a_database_that_does_not_exist_is_said_so(tmp_path: Path, pg_url: str) -> None:
    missing = pg_url.rsplit("/", 1)[0] + "/workly_no_such_database"
    result = workly("migrate", cwd=tmp_path, WORKLY_DATABASE_URL=missing)
    assert_refused(result, "InvalidCatalogNameError", "create the database (createdb)")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_dev_refuses_to_serve_the_network_without_tokens(tmp_path: Path, host: str) -> None:
    """Without API tokens `workly dev` answers anyone as an admin (and delivers to loopback):
    not to the network. Refused before anything is bound or written."""
    result = workly(
        "dev", "--db", str(tmp_path / "w.db"), "--host", host, "--port", str(free_port()), cwd=tmp_path
    )
    assert_refused(result, f"--host {host}", "without authentication", "WORKLY_API_TOKENS")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("192.0.2.1", False)],
)  # fmt: skip
def test_only_loopback(host: str, loopback: bool) -> None:
    assert only_loopback(host) is loopback


def test_serve_refuses_a_short_token_without_showing_it(tmp_path: Path) -> None:
    result = serve(
        tmp_path, WORKLY_DATABASE_URL=PG_URL, WORKLY_SIGNING_SECRET=TEST_SECRET,
        WORKLY_API_TOKENS=f"{TEST_TOKEN} 0123456789abcdef0123456789abcde",  # 31 characters
    )  # fmt: skip
    line = assert_refused(result, "WORKLY_API_TOKENS", "token(s) [2]", "under 32 characters")
    assert "0123456789abcdef" not in line and TEST_TOKEN not in line


def test_dev_on_the_network_refuses_a_short_token_too(tmp_path: Path) -> None:
    result = workly(
        "dev", "--db", str(tmp_path / "w.db"), "--host", "192.0.2.1", "--port", str(free_port()),
        cwd=tmp_path, WORKLY_API_TOKENS="short-token",
    )  # fmt: skip
    assert_refused(result, "WORKLY_API_TOKENS", "token(s) [1]", "under 32 characters")
    assert list(tmp_path.iterdir()) == []
