"""Property-based tests (hypothesis) over task headers and bodies.

1. Wire level, pure: whatever headers the enqueue validation accepts go out as exactly
   those header lines: parsing the request Workly writes gives back the same headers and
   no others, so nothing a caller sends can inject a header or a second request.
2. API level, over a socket against a real `workly dev` with the dispatcher off: an input
   is either stored exactly as sent (201) or refused with a problem and stores nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httptools
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.support.servers import TEST_SECRET, free_port, workly_process
from workly.api.schemas import TaskIn
from workly.dispatch.http.request import encode_request as _encode_request
from workly.request_rules import request_target

# Header names and values built from pieces that matter: token characters, separators,
# the bytes that split lines or end strings, a ready-made injection, non-ASCII.
_PIECES = ["a", "X", "-", "_", "1", ":", " ", "\t", "\r", "\n", "\r\n", "\x00", "\x7f", "é", "€", "😀",
           "\r\nX-Injected: 1", "\r\n\r\nGET /smuggled HTTP/1.1", "Host", "webhook-id",
           "Content-Length"]  # fmt: skip
pieces = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6).map("".join)
header_names = st.one_of(st.from_regex(r"\A[A-Za-z][A-Za-z0-9-]{0,20}\Z"), pieces)
header_values = st.one_of(st.text(max_size=40), pieces)
headers_strategy = st.dictionaries(header_names, header_values, max_size=6)
bodies = st.one_of(
    st.none(), st.text(max_size=200), st.dictionaries(st.text(max_size=10), st.integers(), max_size=5)
)

URL = "http://127.0.0.1:9/hook"  # the dispatcher is off, or nothing is sent at all


class _Parsed:
    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []
        self.complete = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_message_complete(self) -> None:
        self.complete += 1


def _parse(raw: bytes) -> _Parsed:
    parsed = _Parsed()
    httptools.HttpRequestParser(parsed).feed_data(raw)
    return parsed


@settings(max_examples=400, deadline=None)
@given(headers=headers_strategy, body=bodies)
def test_accepted_headers_go_out_exactly_and_alone(headers: dict[str, str], body: Any) -> None:
    try:
        task = TaskIn.model_validate({"url": URL, "headers": headers, "body": body})
    except ValidationError:
        return  # refused at the door: never stored, never sent
    sent_headers, sent_body = task.encoded
    raw = _encode_request("POST", request_target(URL), "127.0.0.1:9", sent_headers, sent_body)
    parsed = _parse(raw)
    assert parsed.complete == 1  # one request, not two
    expected = [(name.lower(), value) for name, value in sent_headers.items()]
    framing = [("host", "127.0.0.1:9"), ("content-length", str(len(sent_body)))]
    assert sorted(parsed.headers) == sorted(expected + framing)
    assert not any(name == "x-injected" for name, _ in parsed.headers)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("X-Test", "a\r\nX-Injected: 1"),
        ("X-Test", "a\nX-Injected: 1"),
        ("X-Test", "a\rb"),
        ("X-Test", "a\x00b"),
        ("X-Test", "a\x85b"),
        ("X-Test", "a\x7fb"),
        ("X-Test\r\nX-Injected", "1"),
        ("a\n", ""),  # hypothesis found it: "^…$" let a final newline through
        ("X-Test\n", "1"),
        ("X Test", "1"),
        ("", "1"),
        ("Host", "evil.example"),
        ("Content-Length", "0"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", "close"),
        ("Upgrade", "websocket"),
        ("Webhook-Signature", "v1,forged"),
        ("X-Test", "€ is not latin-1"),
        ("X-Long", "x" * 9000),
    ],
)
def test_each_known_injection_is_refused(name: str, value: str) -> None:
    with pytest.raises(ValidationError):
        TaskIn.model_validate({"url": URL, "headers": {name: value}})


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    tmp: Path = tmp_path_factory.mktemp("input-fuzz")
    port = free_port()
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, "WORKLY_DISPATCH": "false", "WORKLY_LOG_LEVEL": "warning"}
    with (
        workly_process(
            ["dev", "--db", str(tmp / "w.db"), "--port", str(port)], env, port, tmp / "log"
        ) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        yield client


def _stored(api: httpx.Client) -> int:
    response = api.get("/v1/queues/fuzz")
    return 0 if response.status_code == 404 else sum(response.json()["counts"].values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(headers=headers_strategy, body=bodies)
def test_an_input_is_stored_exactly_or_refused_with_nothing_stored(
    api: httpx.Client, headers: dict[str, str], body: Any
) -> None:
    before = _stored(api)
    response = api.post("/v1/queues/fuzz/tasks", json={"url": URL, "headers": headers, "body": body})
    if response.status_code == 201:
        stored = api.get(f"/v1/tasks/{response.json()['id']}").json()
        assert {k: v for k, v in stored["headers"].items() if k != "content-type"} == {
            k: v for k, v in headers.items() if k.lower() != "content-type"
        }
        assert _stored(api) == before + 1
    else:
        assert response.status_code in (413, 422), response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert _stored(api) == before


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/a\x7fb", "http://127.0.0.1:9/a\x85b", "http://127.0.0.1:9/a b"]
)
def test_urls_with_control_characters_are_refused(url: str) -> None:
    with pytest.raises(ValidationError):
        TaskIn.model_validate({"url": url})
