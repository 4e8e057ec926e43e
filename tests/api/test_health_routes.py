"""Health routes, in-process (the real service and app), on SQLite and on PostgreSQL, with the
dispatcher off."""

from __future__ import annotations

import asyncio

from tests.api.conftest import Api, assert_problem

READY = {"status": "ok", "checks": {"database": "ok", "dispatcher": "disabled"}}


async def test_live_answers_ok(api: Api) -> None:
    response = await api.http.get("/health/live")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"status": "ok"}


async def test_ready_checks_the_database_and_reports_the_dispatcher_disabled(api: Api) -> None:
    response = await api.http.get("/health/ready")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == READY


async def test_ready_stays_ready_under_concurrent_probes_and_traffic(api: Api) -> None:
    probes = [api.http.get("/health/ready") for _ in range(10)]
    writes = [api.http.post("/v1/queues/q/tasks", json={"url": "http://127.0.0.1:9/hook"}) for _ in range(10)]
    responses = await asyncio.gather(*probes, *writes)
    assert [r.status_code for r in responses] == [200] * 10 + [201] * 10
    assert all(r.json() == READY for r in responses[:10])
    assert (await api.counts())["ready"] == 10


async def test_health_routes_do_not_take_other_methods(api: Api) -> None:
    for path in ("/health/live", "/health/ready"):
        response = await api.http.post(path)
        assert_problem(response, 405, "method-not-allowed")
        assert response.headers["allow"] == "GET"


async def test_unknown_health_route_is_a_404_problem(api: Api) -> None:
    assert_problem(await api.http.get("/health/deep"), 404, "not-found")
