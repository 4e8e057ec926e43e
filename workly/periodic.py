"""Background jobs that run every so many seconds and outlive their own failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable


def run_every(
    interval: float, job: Callable[[], Awaitable[None]], name: str, log: logging.Logger
) -> asyncio.Task[None]:
    """Start ``job`` every ``interval`` seconds (first after one interval); a failure is
    logged and the next run comes on schedule. Cancel the returned task to stop it."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except Exception as exc:
                log.warning("%s failed (retrying in %gs): %s", name, interval, exc)

    return asyncio.create_task(loop(), name=f"workly-{name}")
