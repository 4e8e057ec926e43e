"""Failed authentications per client address: after ``limit`` 401s (and 403s to callers
without a credential) within ``window`` seconds
from one address, every request from it answers 429 for ``block`` seconds, a valid token's
too (else an answer other than 429 would tell a guessed token apart). It slows a guesser to
``limit`` tries a minute per address; a token of 32 characters or more (`workly serve`
refuses shorter ones) is out of reach even so.

Kept in each process's memory: with ``serve --workers N`` a guesser gets up to N times the
tries, and a restart forgets. At most ``max_addresses`` addresses are remembered (the ones
seen longest ago are forgotten first), so a flood of addresses costs bounded memory. Behind
a proxy every client shares its address: put the limit in the proxy there.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.responses import Response

from workly.web.problems import problem


@dataclass
class _Address:
    failures: deque[float] = field(default_factory=deque)
    blocked_until: float = 0.0


class AuthFailures:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        limit: int = 20,
        window: float = 60.0,
        block: float = 60.0,
        max_addresses: int = 10_000,
    ) -> None:
        self._clock = clock
        self._limit = limit
        self._window = window
        self._block = block
        self._max_addresses = max_addresses
        self._addresses: OrderedDict[str, _Address] = OrderedDict()

    def blocked_for(self, address: str) -> float:
        """Seconds ``address`` is still refused (0: it is not)."""
        known = self._addresses.get(address)
        return 0.0 if known is None else max(0.0, known.blocked_until - self._clock())

    def failed(self, address: str) -> None:
        """Count a refusal answered to ``address``; the ``limit``-th within the window blocks it."""
        now = self._clock()
        known = self._addresses.pop(address, None) or _Address()
        self._addresses[address] = known  # the most recently seen last
        while known.failures and known.failures[0] <= now - self._window:
            known.failures.popleft()
        known.failures.append(now)
        if len(known.failures) >= self._limit:
            known.blocked_until = now + self._block
            known.failures.clear()
        while len(self._addresses) > self._max_addresses:
            self._addresses.popitem(last=False)


def too_many_failures(wait: float) -> Response:
    seconds = max(1, math.ceil(wait))
    detail = f"Too many failed authentications from this address: retry in {seconds} s."
    response = problem(429, detail, "too-many-failures", retry_after=seconds)
    response.headers["retry-after"] = str(seconds)
    return response
