"""What a process remembers of the database for a short while: values trusted for a few
tenths of a second, so that a change made by another process takes effect within that
time, at the cost of one read per key and period."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from workly.clock import Clock

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Remembered(Generic[V]):
    value: V
    read_at: float  # the clock's monotonic seconds


class ShortCache(Generic[K, V]):
    """Values by key, fresh for ``seconds``; at most ``max_entries`` (stale ones are dropped
    first when it is full, then the oldest)."""

    def __init__(self, clock: Clock, seconds: float, max_entries: int = 10_000) -> None:
        self._clock = clock
        self._seconds = seconds
        self._max_entries = max_entries
        self._entries: dict[K, Remembered[V]] = {}

    def get(self, key: K) -> Remembered[V] | None:
        """The value, if it was read less than ``seconds`` ago (None may be a value)."""
        entry = self._entries.get(key)
        if entry is None or self._clock.monotonic() - entry.read_at >= self._seconds:
            return None
        return entry

    def put(self, key: K, value: V) -> None:
        now = self._clock.monotonic()
        if key not in self._entries and len(self._entries) >= self._max_entries:
            fresh = {k: e for k, e in self._entries.items() if now - e.read_at < self._seconds}
            while len(fresh) >= self._max_entries:  # all fresh: the oldest go
                del fresh[next(iter(fresh))]
            self._entries = fresh
        self._entries[key] = Remembered(value, now)

    def drop(self, key: K) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
