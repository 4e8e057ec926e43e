from __future__ import annotations

import io
from pathlib import Path

import pytest

from workly.client.inputs import InputError, parse_delay, parse_headers, read_data


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30), ("1.5", 1.5), ("5s", 5), ("250ms", 0.25), ("10m", 600), ("2h", 7200), ("1d", 86400),
     (" 3 s ", 3)],
)  # fmt: skip
def test_delays(text: str, seconds: float) -> None:
    assert parse_delay(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "-5s", "5 weeks", "5x", "1e3", "nan", "1" * 400 + "d"])
def test_bad_delays_are_refused(text: str) -> None:
    with pytest.raises(InputError):
        parse_delay(text)


def test_data_inline_from_file_and_from_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_data('{"a": [1, 2]}') == {"a": [1, 2]}
    assert read_data('"text"') == "text"
    body = tmp_path / "body.json"
    body.write_text('{"from": "file"}')
    assert read_data(f"@{body}") == {"from": "file"}
    monkeypatch.setattr("sys.stdin", io.StringIO('{"from": "stdin"}'))
    assert read_data("@-") == {"from": "stdin"}


@pytest.mark.parametrize(
    ("text", "says"), [("not json", "not JSON"), ("@/nonexistent/x.json", "cannot read")]
)
def test_bad_data_is_refused_with_the_reason(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        read_data(text)


def test_headers() -> None:
    assert parse_headers(["X-One: 1", "x-two:two words ", "Empty:"]) == {
        "X-One": "1",
        "x-two": "two words",
        "Empty": "",
    }


@pytest.mark.parametrize("values", [["no colon"], [": no name"], ["A: 1", "a: 2"]])
def test_bad_headers_are_refused(values: list[str]) -> None:
    with pytest.raises(InputError):
        parse_headers(values)
