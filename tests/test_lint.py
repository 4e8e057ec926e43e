"""Lint and type checks run as part of the test suite: ruff check, ruff format --check, mypy.

Each runs as a subprocess of this interpreter (``sys.executable -m ...``) from the repository
root, so the tools of the environment running pytest are used and their configuration in
pyproject.toml applies (mypy: strict on workly/).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHECKS = {
    "ruff check": ["ruff", "check", "."],
    "ruff format": ["ruff", "format", "--check", "."],
    "mypy": ["mypy"],
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("args", list(CHECKS.values()), ids=list(CHECKS))
def test_tool_passes(args: list[str]) -> None:
    command = [sys.executable, "-m", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        pytest.fail(f"`{' '.join(args)}` exited with {done.returncode}:\n{output}", pytrace=False)
