"""How the CLI follows an operation: through a restart of the server, with a word when nothing
moves, and with its own exit status when it has to give up. The server is scripted at the
HTTP transport (httpx.MockTransport): what is tested is the client's loop, not a server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import typer

from workly.client import operations as ops
from workly.client.api import ApiClient


def operation(state: str = "running", updated_at: str = "t0", changed: int = 0) -> dict[str, Any]:
    return {
        "id": "op_1", "action": "retry", "filter": {"queue": "q"}, "state": state, "matched": 2,
        "changed": changed, "skipped": 0, "error": None, "created_at": "t0", "updated_at": updated_at,
        "finished_at": None,
    }  # fmt: skip


def scripted(answers: list[httpx.Response]) -> ApiClient:
    script: Iterator[httpx.Response] = iter(answers)
    return ApiClient("http://127.0.0.1:9", None, transport=httpx.MockTransport(lambda _: next(script)))


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The loop's sleeps, recorded instead of slept; its clock moves by what it slept."""
    slept: list[float] = []
    clock = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(ops.time, "sleep", sleep)
    monkeypatch.setattr(ops.time, "monotonic", lambda: clock[0])
    return slept


def test_a_restarting_server_is_waited_for(no_waiting: list[float]) -> None:
    api = scripted([
        httpx.Response(503, json={"detail": "restarting"}),
        httpx.Response(502),
        httpx.Response(200, json=operation(changed=1, updated_at="t1")),
        httpx.Response(200, json=operation("succeeded", "t2", changed=2)),
    ])  # fmt: skip
    assert ops.follow(api, operation(), None)["state"] == "succeeded"
    assert no_waiting == sorted(no_waiting) and max(no_waiting) <= ops.MAX_POLL_SECONDS  # backs off


def test_an_error_the_server_gives_ends_the_waiting_as_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    api = scripted([httpx.Response(404, json={"type": "urn:workly:problem:not-found", "detail": "gone"})])
    with pytest.raises(typer.Exit) as exited:
        ops.follow(api, operation(), None)
    assert exited.value.exit_code == ops.UNKNOWN_OUTCOME != 1  # not "the operation failed"
    assert "op_1 continues on the server" in capsys.readouterr().err


def test_an_operation_nobody_works_on_is_named_once(capsys: pytest.CaptureFixture[str]) -> None:
    stuck = [httpx.Response(200, json=operation()) for _ in range(12)]
    api = scripted([*stuck, httpx.Response(200, json=operation("succeeded", "t9", changed=2))])
    ops.follow(api, operation(), None)
    err = capsys.readouterr().err
    assert err.count("has not moved") == 1 and "WORKLY_DISPATCH=false" in err
