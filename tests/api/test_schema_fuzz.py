"""schemathesis against the app's own OpenAPI schema: no input gives a 5xx, and every 4xx is
a problem+json with a stable type.

A real `workly dev` serves it, with the dispatcher off (WORKLY_DISPATCH=false): the fuzzer
makes up URLs, and nothing it stores may ever be delivered. Bounded: a fixed number of
examples per operation, derandomized, so CI time stays flat.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.servers import AUTH, TEST_SECRET, free_port, workly_process

PROBLEM_FIELDS = {"type", "title", "status", "detail"}


@pytest.fixture(scope="module")
def workly_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    env = {"WORKLY_SIGNING_SECRET": TEST_SECRET, "WORKLY_DISPATCH": "false", "WORKLY_LOG_LEVEL": "warning"}
    with workly_process(
        ["dev", "--db", str(tmp / "w.db"), "--port", str(port)], env, port, tmp / "log"
    ) as url:
        yield url


def check(response: schemathesis.Response, where: str) -> None:
    assert response.status_code < 500, (where, response.text)
    if 400 <= response.status_code < 500:
        assert response.headers["content-type"] == ["application/problem+json"], (where, response.text)
        body = response.json()
        assert body.keys() >= PROBLEM_FIELDS, (where, body)
        assert body["status"] == response.status_code
        assert body["type"].startswith("urn:workly:problem:")


def test_no_input_gives_a_server_error_and_every_refusal_is_a_problem(workly_api: str) -> None:
    schema = schemathesis.openapi.from_url(f"{workly_api}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12  # every route is in the schema, so every route is fuzzed
    statuses: list[int] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def exercise(case: schemathesis.Case) -> None:
            response = case.call(headers=AUTH, timeout=10)
            statuses.append(response.status_code)
            check(response, f"{case.method} {case.formatted_path}")

        exercise()
    # The fuzzer got inputs both accepted and refused: it exercised more than the validation.
    assert any(200 <= s < 300 for s in statuses) and any(400 <= s < 500 for s in statuses)
