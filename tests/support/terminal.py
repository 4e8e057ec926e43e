"""The real CLI run as a person runs it in a shell: in a session of its own whose controlling
terminal is a pseudo-terminal. ``ctrl_c()`` types Ctrl-C on that terminal, and the kernel
signals the terminal's foreground process group, as with a real terminal: every process of
the group hears it, not only the one the test started (``send_signal`` reaches only that one).
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# Runs in the child before Workly: a session leader takes its controlling terminal with
# TIOCSCTTY (an ioctl, not a preexec_fn: those are unsafe once the test has threads), then
# becomes `python -m workly`, keeping its PID.
_TAKE_THE_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'workly', *sys.argv[1:]])"
)


@dataclass
class Terminal:
    process: subprocess.Popen[bytes]
    controller: int  # the terminal's other end: what a person types goes in here
    shown: bytes = b""  # what the terminal echoed (the programs write to the log, not here)

    def ctrl_c(self, timeout: float = 5) -> None:
        """Type Ctrl-C; return once the terminal has signalled its foreground process group.
        The kernel handles typed input later, in a thread of its own: it echoes "^C" right
        after it has sent the signal, so that echo is the sign."""
        echoes = self.shown.count(b"^C")
        os.write(self.controller, b"\x03")
        deadline = time.monotonic() + timeout
        while self.shown.count(b"^C") == echoes:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.controller], [], [], left)[0]:
                raise TimeoutError(f"the terminal did not echo Ctrl-C within {timeout}s")
            self.shown += os.read(self.controller, 1024)

    def descendants(self) -> list[int]:
        """The PIDs of the process's children, and theirs."""
        return descendants(self.process.pid)


@contextmanager
def on_a_terminal(args: list[str], env: dict[str, str], log: Path) -> Iterator[Terminal]:
    """Start ``python -m workly <args>`` on a new pseudo-terminal (its output goes to ``log``);
    at the end, kill what is left of it (its descendants too, which may have left its session)
    and close the terminal."""
    controller, tty = pty.openpty()
    try:
        with _started([sys.executable, "-c", _TAKE_THE_TERMINAL, *args], env, log, stdin=tty) as process:
            yield Terminal(process, controller)
    finally:
        os.close(controller)  # only once all is gone: closing it hangs up the session (SIGHUP)


@contextmanager
def detached(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``python -m workly <args>`` in a session of its own with no terminal, as a service
    manager or a shell's ``nohup … &`` does: nothing hangs it up when it dies. At the end, kill
    what is left of it, its descendants too."""
    with _started([sys.executable, "-m", "workly", *args], env, log, stdin=subprocess.DEVNULL) as process:
        yield process


@contextmanager
def _started(
    command: list[str], env: dict[str, str], log: Path, stdin: int
) -> Iterator[subprocess.Popen[bytes]]:
    """``stdin``: subprocess.DEVNULL, or a descriptor, closed here once the child has it."""
    try:
        with log.open("ab") as out:
            process = subprocess.Popen(
                command,
                env={**os.environ, **env},
                stdin=stdin,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    finally:
        if stdin >= 0:
            os.close(stdin)
    try:
        yield process
    finally:
        stragglers = descendants(process.pid)
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in stragglers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (Linux: read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                # The command name, in parentheses, may hold spaces: the fields follow its ")".
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        below = [child for child, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for_exit(pids: list[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` seconds for processes that are not our children to end (they
    cannot be waited on); those still running then."""
    deadline = time.monotonic() + timeout
    while (running := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running
