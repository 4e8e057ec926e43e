"""CPU time of processes, from /proc: what the soak's processes cost per delivered task.

``cpu_seconds(pid)`` is user + system time of one process; ``tree_seconds(pid)`` adds its
children's (a PostgreSQL postmaster's backends, its checkpointer, its WAL writer). A
``CpuMeter`` turns cumulative times into time per window, per group of processes: a process
that is new in a window (a restart) counts with everything it used so far.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

_TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after its closing one.
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float | None:
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and int(fields[1]) == pid:  # ppid (field 4)
                found.append(int(entry))
    return found


def tree(pid: int) -> list[int]:
    return [pid, *children(pid)]


class CpuMeter:
    def __init__(self) -> None:
        self._last: dict[int, float] = {}

    def used(self, pids: Iterable[int]) -> float:
        """CPU seconds ``pids`` used since the last call that saw them."""
        total = 0.0
        for pid in pids:
            now = cpu_seconds(pid)
            if now is None:
                continue
            total += now - self._last.get(pid, 0.0)
            self._last[pid] = now
        return total
