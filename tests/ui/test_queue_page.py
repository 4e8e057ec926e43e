"""A queue's page and the charts of the last hour, in-process on both backends.

No dispatcher runs here: the minutes the charts draw are written through the service's
storage, as the housekeeper writes the dispatcher's counts (tests/e2e/test_dashboard.py
draws real deliveries in a browser).
"""

from __future__ import annotations

import re
from datetime import timedelta

import httpx

from tests.support.servers import AUTH
from tests.ui.helpers import HOOK, log_in, origin
from workly.delivery_stats import MinuteStats, Scope, bucket_of, minute_of
from workly.service import Service

App = tuple[Service, httpx.AsyncClient]


def bars(page: str, chart: str = "deliveries-chart") -> dict[str, tuple[int, int]]:
    """The deliveries chart's minutes that had attempts: {minute: (succeeded, failures)}."""
    svg = re.search(rf'<svg id="{chart}".*?</svg>', page, re.S)
    assert svg is not None, f"no {chart}"
    found = re.findall(r'data-minute="([^"]+)" data-succeeded="(\d+)" data-failures="(\d+)"', svg.group(0))
    assert len(found) == 60  # one per minute of the hour
    return {minute: (int(ok), int(bad)) for minute, ok, bad in found if (ok, bad) != ("0", "0")}


def points(page: str, series: str) -> dict[str, float]:
    svg = re.search(r'<svg id="latency-chart".*?</svg>', page, re.S)
    assert svg is not None
    found = re.findall(rf'data-series="{series}" data-minute="([^"]+)" data-ms="([\d.]+)"', svg.group(0))
    return {minute: float(ms) for minute, ms in found}


async def write_minutes(service: Service, scope: Scope, name: str) -> tuple[str, str]:
    """Two minutes of counts, 5 minutes ago and now (as two processes would write the first)."""
    now = minute_of(service.now())
    earlier = MinuteStats(scope, name, now - timedelta(minutes=5), succeeded=6, retried=2, failed=1)
    earlier.buckets[bucket_of(3)] = 9
    other_process = MinuteStats(scope, name, now - timedelta(minutes=5), succeeded=3)
    other_process.buckets[bucket_of(700)] = 3
    current = MinuteStats(scope, name, now, succeeded=4)
    current.buckets[bucket_of(40)] = 4
    await service.storage.history.add_delivery_minutes([earlier, current])
    await service.storage.history.add_delivery_minutes([other_process])
    return f"{earlier.minute:%Y-%m-%dT%H:%M:%SZ}", f"{now:%Y-%m-%dT%H:%M:%SZ}"


async def test_a_queue_page_shows_its_config_counts_and_a_pause_that_comes_back(app: App) -> None:
    _, http = app
    await http.put("/v1/queues/q", json={"max_concurrency": 7, "rate_limit": 2.5}, headers=AUTH)
    for _ in range(2):
        await http.post("/v1/queues/q/tasks", json={"url": HOOK}, headers=AUTH)
    await log_in(http)
    overview = (await http.get("/ui")).text
    assert '<a href="/ui/queues/q">q</a>' in overview
    page = (await http.get("/ui/queues/q")).text
    assert 'data-status="ready" href="/ui/tasks?queue=q&amp;status=ready">2 ready</a>' in page
    assert "<dd>7</dd>" in page and "2.5 / s" in page
    assert "No attempts in the last hour." in page and bars(page) == {}
    paused = await http.post("/ui/queues/q/pause?to=queue", headers=origin(http))
    assert (paused.status_code, paused.headers["location"]) == (303, "/ui/queues/q?done=paused")
    shown = (await http.get(paused.headers["location"])).text
    assert 'id="state" class="state-paused">paused<' in shown and "Paused: its tasks wait" in shown
    assert ">Resume</button>" in shown


async def test_unknown_or_impossible_queue_names_are_404_pages(app: App) -> None:
    _, http = app
    await log_in(http)
    for path in ("/ui/queues/nope", "/ui/queues/a%00b", "/ui/queues/" + "x" * 500, "/ui/queues/%3Cscript%3E"):
        response = await http.get(path)
        assert response.status_code == 404 and "There is no such queue" in response.text, path
        assert "<script>" not in response.text


async def test_the_charts_draw_every_processes_minutes(app: App) -> None:
    service, http = app
    await http.post("/v1/queues/q/tasks", json={"url": HOOK}, headers=AUTH)
    earlier, now = await write_minutes(service, "queue", "q")
    await write_minutes(service, "queue", "other")  # another queue's: not on this page
    await log_in(http)
    page = (await http.get("/ui/queues/q")).text
    assert bars(page) == {earlier: (9, 3), now: (4, 0)}
    assert points(page, "p50") == {earlier: 5, now: 50}  # 9 of 12 took ≤ 5 ms
    assert points(page, "p95") == {earlier: 1000, now: 50}  # the other process's 3 took ≤ 1 s
    assert "No attempts in the last hour." not in page
    assert "<title>" in page and "9 delivered" in page


async def test_an_endpoint_page_draws_its_own_minutes(app: App) -> None:
    service, http = app
    created = await http.post("/v1/endpoints", json={"url": HOOK}, headers=AUTH)
    endpoint_id = created.json()["id"]
    earlier, now = await write_minutes(service, "endpoint", endpoint_id)
    await log_in(http)
    page = (await http.get(f"/ui/endpoints/{endpoint_id}")).text
    assert bars(page) == {earlier: (9, 3), now: (4, 0)}
    assert bars((await http.get(f"/ui/queues/{endpoint_id}")).text) == {}  # the queue series: none written
