"""A PostgreSQL cluster of one's own, in a temporary directory, that can be stopped and
started again (the same data, the same port): for restarting the database under a running
Workly without touching anyone else's server. The tests' restart test and the soak use it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tools.ports import free_port


def server_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


class Cluster:
    """``fsync=False`` trades durability against an OS crash for speed (the tests);
    the soak keeps fsync on, so that its table sizes and claim times are a real server's."""

    def __init__(self, *, fsync: bool = False, parent: str | None = None) -> None:
        initdb, pg_ctl = server_binary("initdb"), server_binary("pg_ctl")
        if not initdb or not pg_ctl:
            raise LookupError("no PostgreSQL server binaries on PATH")
        self._pg_ctl = pg_ctl
        self._fsync = fsync
        self.data = Path(tempfile.mkdtemp(prefix="workly-pg-", dir=parent))
        self._run_as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            shutil.chown(self.data, "postgres")
            self._run_as = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        subprocess.run(
            [*self._run_as, initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust"],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        opts = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data}"
        if not self._fsync:
            opts += " -c fsync=off"
        log = str(self.data / "log")
        subprocess.run(
            [*self._run_as, self._pg_ctl, "-D", str(self.data), "-o", opts, "-w", "-l", log, "start"],
            check=True,
            capture_output=True,
        )

    def postmaster_pid(self) -> int | None:
        """The server's main process, from postmaster.pid (None while it is down)."""
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            [*self._run_as, self._pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop"], capture_output=True
        )

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.data, ignore_errors=True)
