"""Waiting for a task's outcome (`workly enqueue --wait`): ask the server until it ends."""

from __future__ import annotations

import time
from typing import Any

from workly.client.api import ApiClient

FINAL = frozenset({"succeeded", "failed", "canceled"})


def follow_task(api: ApiClient, task_id: str, poll: float = 0.2, longest: float = 5.0) -> dict[str, Any]:
    """The task once it has ended, with its attempts. Asks again after ``poll`` seconds, a
    little longer each time (up to ``longest``): a task may wait hours for its next attempt."""
    wait = poll
    while True:
        task = api.task(task_id)
        if task["status"] in FINAL:
            return {"task": task, "attempts": api.attempts(task_id)}
        time.sleep(wait)
        wait = min(longest, wait * 1.5)
