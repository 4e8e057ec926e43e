"""The README's quick start, as printed, in a fresh copy of the repository and a fresh venv:
the install command, `workly dev`, then the load test command the README prints (shorter).

The commands are read from README.md, not copied here, so the test follows the README.
Only the port and the database file are added to `workly dev` (its documented options, so
the test can run beside others) and the load test is shortened and pointed at that port.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.servers import free_port, workly_process

pytestmark = [pytest.mark.e2e, pytest.mark.long]
REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def readme_block(after: str) -> str:
    """The first ```sh block after the line ``after``."""
    tail = README[README.index(after) :]
    found = re.search(r"```sh\n(.*?)\n```", tail, re.DOTALL)
    assert found is not None, f"no sh block after {after!r}"
    return found.group(1)


def fresh_copy(into: Path) -> Path:
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.db", "*.db-*", "*.signing-secret", ".ruff_cache", ".mypy_cache"
    )
    return Path(shutil.copytree(REPO, into / "workly", ignore=ignore))


@pytest.mark.timeout(900)
def test_the_quick_start_then_the_load_test_as_the_readme_prints_them(tmp_path: Path) -> None:
    install, _, start = readme_block("## Quick start").rpartition(" && ")
    assert start == ".venv/bin/workly dev", start
    clone = fresh_copy(tmp_path)
    env = {
        name: value for name, value in os.environ.items() if not name.startswith(("WORKLY_", "VIRTUAL_ENV"))
    }
    installed = subprocess.run(
        install, shell=True, cwd=clone, env=env, capture_output=True, text=True, timeout=800, check=False
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    port = free_port()
    dev = [*shlex.split(start)[1:], "--port", str(port), "--db", str(tmp_path / "quick.db")]
    log = tmp_path / "dev.log"
    workly = str(clone / ".venv/bin/workly")
    with workly_process(dev, env, port, log, program=[workly]):
        printed = readme_block("## Performance").splitlines()[0]
        assert printed == ".venv/bin/workly loadtest --rate 1000 --duration 20s", printed
        args = shlex.split(printed)[1:]
        args[args.index("--rate") + 1], args[args.index("--duration") + 1] = "100", "2s"
        run = subprocess.run(
            [workly, *args, "--warmup", "1s", "--quiet", "--server", f"http://127.0.0.1:{port}"],
            cwd=clone, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "lost 0, duplicated 0" in run.stdout and "| 100/s |" in run.stdout
