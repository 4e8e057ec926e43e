"""The Workly processes under test: started, killed, stopped and continued by PID.

Every process is the real CLI (``python -m workly serve`` on PostgreSQL, ``workly dev`` on
SQLite) on its own port of 127.0.0.1, with its output appended to ``workly-<n>.log`` in the
soak's directory across restarts. Only the processes started here are ever signalled.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tools.ports import free_port

TOKEN = "soak-token-0123456789abcdef-0123456789"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@dataclass
class Member:
    index: int
    args: list[str]
    log: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    stopped: bool = False  # SIGSTOPped
    starts: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None and not self.stopped


@dataclass
class Fleet:
    """``env``: the WORKLY_* settings every process gets (the parent's own WORKLY_* are dropped)."""

    workdir: Path
    env: dict[str, str]
    members: list[Member] = field(default_factory=list)

    @classmethod
    def postgres(cls, workdir: Path, env: dict[str, str], count: int) -> Fleet:
        fleet = cls(workdir, env)
        for index in range(count):
            port = free_port()
            args = ["serve", "--host", "127.0.0.1", "--port", str(port)]
            fleet.members.append(Member(index, args, workdir / f"workly-{index}.log", port))
        return fleet

    @classmethod
    def sqlite(cls, workdir: Path, env: dict[str, str], database: Path) -> Fleet:
        fleet = cls(workdir, env)
        port = free_port()
        args = ["dev", "--db", str(database), "--port", str(port)]
        fleet.members.append(Member(0, args, workdir / "workly-0.log", port))
        return fleet

    def _environment(self) -> dict[str, str]:
        base = {name: value for name, value in os.environ.items() if not name.startswith("WORKLY_")}
        return {**base, **self.env}

    def start(self, member: Member) -> None:
        with member.log.open("ab") as out:
            out.write(f"\n=== soak: start #{member.starts + 1} at {time.time():.3f}\n".encode())
            out.flush()
            member.process = subprocess.Popen(
                [sys.executable, "-m", "workly", *member.args],
                env=self._environment(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        member.stopped = False
        member.starts += 1

    async def wait_ready(self, member: Member, within: float = 60.0) -> None:
        """Until /health/ready answers 200; RuntimeError if the process exits or time runs out."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if member.process is None or member.process.poll() is not None:
                raise RuntimeError(f"workly process {member.index} exited; see {member.log}")
            if await asyncio.to_thread(_ready, member.base_url):
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"workly process {member.index} not ready after {within:.0f}s; see {member.log}")

    async def start_all(self) -> None:
        for member in self.members:
            self.start(member)
            # One at a time: the first applies the migrations, the others find them applied.
            await self.wait_ready(member)

    def kill(self, member: Member) -> None:
        """SIGKILL: no shutdown, no flush; what it held comes back through the reaper."""
        if member.process is not None:
            if member.stopped:
                member.process.send_signal(signal.SIGCONT)
            member.process.kill()
            member.process.wait()
            member.stopped = False

    def pause(self, member: Member) -> None:
        if member.process is not None:
            member.process.send_signal(signal.SIGSTOP)
            member.stopped = True

    def resume(self, member: Member) -> None:
        if member.process is not None and member.stopped:
            member.process.send_signal(signal.SIGCONT)
            member.stopped = False

    def stop_all(self, grace: float = 30.0) -> None:
        for member in self.members:
            self.resume(member)
            if member.process is not None and member.process.poll() is None:
                member.process.send_signal(signal.SIGTERM)
        for member in self.members:
            if member.process is None:
                continue
            try:
                member.process.wait(grace)
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()

    def live(self) -> list[Member]:
        return [member for member in self.members if member.running]

    def rss_mib(self) -> dict[int, float | None]:
        return {member.index: rss_mib(member.pid) if member.running else None for member in self.members}


def rss_mib(pid: int | None) -> float | None:
    """Resident set size from /proc, in MiB (None when the process is gone)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health/ready", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False
