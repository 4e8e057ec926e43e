"""With the otel extra and OTEL_EXPORTER_OTLP_ENDPOINT set, spans for the enqueue, the claim
and each attempt reach an OTLP/HTTP collector (one in the test, on 127.0.0.1), linked so
that a receiver's spans hang below the attempt's; without OTEL_* nothing of the extra (the
SDK, the exporter) is imported (a fresh interpreter, the real service)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.support.receiver import Receiver, running_receiver
from tests.support.servers import TEST_SECRET, in_process
from workly.config import Settings
from workly.tracing_setup import tracing_from_environment

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"


@asynccontextmanager
async def collector() -> AsyncIterator[tuple[str, list[Span]]]:
    spans: list[Span] = []

    async def traces(request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        spans.extend(s for r in export.resource_spans for scoped in r.scope_spans for s in scoped.spans)
        return web.Response(status=200, content_type="application/x-protobuf", body=b"")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", spans
    finally:
        await runner.cleanup()


@dataclass
class Traced:
    """A collector, a receiver, and the settings of a service whose spans go to the one and
    whose deliveries to the other (OTEL_* set for the test)."""

    spans: list[Span]
    receiver: Receiver
    settings: Settings


@pytest.fixture
async def traced(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Traced]:
    async with collector() as (endpoint, spans), running_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        settings = Settings(database_url=sqlite_url, signing_secret=TEST_SECRET, outbound_allow="127.0.0.0/8")
        yield Traced(spans, receiver, settings)


def attributes(span: Span) -> dict[str, Any]:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


async def test_enqueue_claim_and_attempt_spans_are_exported_and_linked(traced: Traced) -> None:
    receiver = traced.receiver
    receiver.script("/hook", [500])
    async with in_process(traced.settings) as (service, http):
        assert service.tracing.enabled
        body = {"url": receiver.url("/hook"), "min_backoff": 0, "max_backoff": 0}
        headers = {"traceparent": f"00-{TRACE}-{CALLER}-01"}
        assert (await http.post("/v1/queues/q/tasks", json=body, headers=headers)).status_code == 201
        delivered = await receiver.wait_for("/hook", 2)
    # Stopping the service exported what was left.
    by_name: dict[str, list[Span]] = {}
    for span in traced.spans:
        by_name.setdefault(span.name, []).append(span)
    [enqueue] = by_name["workly.enqueue"]
    assert (enqueue.trace_id.hex(), enqueue.parent_span_id.hex(), enqueue.kind) == (
        TRACE,
        CALLER,
        Span.SPAN_KIND_PRODUCER,
    )
    assert attributes(enqueue)["messaging.destination.name"] == "q"
    attempts = sorted(by_name["POST"], key=lambda s: s.start_time_unix_nano)
    assert [a.parent_span_id for a in attempts] == [enqueue.span_id, enqueue.span_id]
    assert {a.trace_id.hex() for a in attempts} == {TRACE}
    # Each delivery's traceparent names its attempt's span: the receiver's spans go below it.
    assert [r.headers["traceparent"].split("-")[2] for r in delivered] == [a.span_id.hex() for a in attempts]
    failed, succeeded = attempts
    assert failed.status.code == Status.STATUS_CODE_ERROR
    assert succeeded.status.code != Status.STATUS_CODE_ERROR
    assert attributes(succeeded)["http.response.status_code"] == 204
    assert attributes(succeeded)["server.address"] == "127.0.0.1"
    assert not any(key.startswith("url.full") or key == "http.url" for key in attributes(succeeded))
    # The first attempt's task was leased by its enqueue (eager dispatch): only the retry was claimed.
    assert sum(attributes(c)["workly.claimed"] for c in by_name["workly.claim"]) == 1


async def test_a_publish_span_parents_its_deliveries(traced: Traced) -> None:
    receiver = traced.receiver
    async with in_process(traced.settings) as (_, http):
        for path in ("/a", "/b"):
            assert (await http.post("/v1/endpoints", json={"url": receiver.url(path)})).status_code == 201
        assert (await http.post("/v1/events", json={"type": "a.b", "payload": {}})).status_code == 201
        await receiver.wait_for("/a", 1)
        await receiver.wait_for("/b", 1)
    [publish] = [s for s in traced.spans if s.name == "workly.publish"]
    assert publish.parent_span_id == b""  # no traceparent came: a new trace starts here
    deliveries = [s for s in traced.spans if s.name == "POST"]
    assert len(deliveries) == 2 and {s.parent_span_id for s in deliveries} == {publish.span_id}


@pytest.mark.parametrize(
    ("environ", "enabled"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, False),  # not OTLP: nothing (and a warning)
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console, otlp"}, True),  # a list: OTLP among them (the rest warned of)
        ({"OTEL_TRACES_EXPORTER": "otlp,none"}, False),
    ],
)
def test_which_environment_asks_for_spans(environ: dict[str, str], enabled: bool) -> None:
    tracing = tracing_from_environment(environ)
    assert tracing.enabled is enabled
    tracing.shutdown()


def test_without_the_extra_the_variables_only_warn(caplog: pytest.LogCaptureFixture) -> None:
    blocked = dict.fromkeys(["opentelemetry", "workly.otel"])  # None in sys.modules: ImportError
    with pytest.MonkeyPatch.context() as patch:
        for name in blocked:
            patch.setitem(sys.modules, name, None)
        tracing = tracing_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert not tracing.enabled
    assert "install Workly with the otel extra" in caplog.text


SERVE_ONE_TASK = """
import asyncio, sys
from workly.config import Settings
from workly.service import Service
from tests.support.receiver import running_receiver
from tests.support.servers import TEST_SECRET
from tests.storage.helpers import new

async def main(db):
    async with running_receiver() as receiver:
        settings = Settings(database_url=db, signing_secret=TEST_SECRET, outbound_allow="127.0.0.0/8")
        async with Service(settings).running() as service:
            traced = new(url=receiver.url("/x"), traceparent="00-%s-%s-01" % ("1" * 32, "2" * 16))
            await service.tasks.enqueue([traced])
            await receiver.wait_for("/x", 1)
    # FastAPI itself imports opentelemetry-api; the otel extra is what Workly must not load.
    print(sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter",
                                                          "workly.otel"))))

asyncio.run(main(sys.argv[1]))
"""


def test_without_otel_variables_nothing_of_the_otel_extra_is_imported(sqlite_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "WORKLY_"))}
    done = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_TASK, sqlite_url],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
