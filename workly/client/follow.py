"""Waiting for a task's outcome (`workly enqueue --wait`): ask the server until it ends."""

from __future__ import annotations

import time
from typing import Any

import typer

from workly.client.api import ApiClient, ClientError

FINAL = frozenset({"succeeded", "failed", "canceled"})
UNREACHABLE_SECONDS = 60.0  # a server that does not answer (a restart) is waited for this long
UNKNOWN_OUTCOME = 3  # exit status when the waiting ended before what it waited for
INTERRUPTED = 130  # what a shell reports for a command stopped by Ctrl-C (128 + SIGINT)


class Outage:
    """While asking a server again and again: a spell without an answer (a restart, or
    502-504) is waited out for up to UNREACHABLE_SECONDS; any other error, or a longer
    spell, is raised (`workly enqueue --wait`, and the bulk operations' waiting)."""

    def __init__(self) -> None:
        self._since: float | None = None

    def answered(self) -> None:
        self._since = None

    def failed(self, exc: ClientError) -> None:
        """Returns to ask again later, or raises ``exc``."""
        if not exc.unreachable:
            raise exc
        self._since = self._since or time.monotonic()
        if time.monotonic() - self._since > UNREACHABLE_SECONDS:
            raise exc


def follow_task(api: ApiClient, task_id: str, poll: float = 0.2, longest: float = 5.0) -> dict[str, Any]:
    """The task once it has ended, with its attempts. Asks again after ``poll`` seconds, a
    little longer each time (up to ``longest``): a task may wait hours for its next attempt.
    A server that does not answer for a while (a restart) is waited for up to
    UNREACHABLE_SECONDS; then, on another error, or on Ctrl-C, the waiting ends (exit 3, or
    130): the task goes on, its outcome unknown here, which is not a failure (exit 1)."""
    wait, outage = poll, Outage()
    try:
        while True:
            try:
                task = api.task(task_id)
                if task["status"] in FINAL:
                    return {"task": task, "attempts": api.attempts(task_id)}
                outage.answered()
            except ClientError as exc:
                outage.failed(exc)
            time.sleep(wait)
            wait = min(longest, wait * 1.5)
    except KeyboardInterrupt:
        typer.echo(f"workly: stopped waiting; the task goes on (workly task {task_id})", err=True)
        raise typer.Exit(code=INTERRUPTED) from None
    except ClientError as exc:
        typer.echo(f"workly: {exc}; stopped waiting, the task goes on (workly task {task_id})", err=True)
        raise typer.Exit(code=UNKNOWN_OUTCOME) from None
