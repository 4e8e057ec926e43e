"""`workly enqueue --wait`'s waiting (client/follow.py), against a scripted server: a
restart is waited out, a server gone for good or Ctrl-C ends the waiting with its own exit
status (the outcome is unknown, not failed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer

from workly.client import follow
from workly.client.api import ClientError


class ScriptedServer:
    """Answers task() from a script: a status, or an exception to raise."""

    def __init__(self, script: list[str | BaseException]) -> None:
        self.script: Iterator[str | BaseException] = iter(script)

    def task(self, task_id: str) -> dict[str, Any]:
        step = next(self.script)
        if isinstance(step, BaseException):
            raise step
        return {"id": task_id, "status": step}

    def attempts(self, task_id: str) -> list[dict[str, Any]]:
        return [{"attempt": 1}]


DOWN = ClientError("cannot reach http://127.0.0.1:9", unreachable=True)


def wait_for(server: ScriptedServer) -> dict[str, Any]:
    return follow.follow_task(server, "task_1", poll=0.001, longest=0.001)  # type: ignore[arg-type]


def test_a_server_restarting_is_waited_out() -> None:
    ended = wait_for(ScriptedServer(["ready", DOWN, DOWN, "running", "succeeded"]))
    assert ended["task"]["status"] == "succeeded" and ended["attempts"] == [{"attempt": 1}]


def test_a_server_gone_for_longer_ends_the_waiting_as_unknown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(follow, "UNREACHABLE_SECONDS", 0.0)
    with pytest.raises(typer.Exit) as stopped:
        wait_for(ScriptedServer(["ready", DOWN, DOWN]))
    assert stopped.value.exit_code == follow.UNKNOWN_OUTCOME
    assert "the task goes on (workly task task_1)" in capsys.readouterr().err


def test_an_error_the_server_gives_is_not_waited_out() -> None:
    with pytest.raises(typer.Exit) as stopped:
        wait_for(ScriptedServer([ClientError("404 Not Found: no task task_1")]))
    assert stopped.value.exit_code == follow.UNKNOWN_OUTCOME


def test_ctrl_c_stops_the_waiting_not_the_task(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as stopped:
        wait_for(ScriptedServer(["ready", KeyboardInterrupt()]))
    assert stopped.value.exit_code == follow.INTERRUPTED
    assert "stopped waiting; the task goes on" in capsys.readouterr().err
