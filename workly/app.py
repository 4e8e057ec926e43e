"""The ASGI application: the API and the dashboard over one service, behind the guards.

This is where the adapters meet (they never import each other): ``create_app`` takes a
built ``Service`` and returns the app that serves it, whose lifespan starts and stops the
service. `workly dev` calls it directly; `workly serve` runs ``app_from_env`` in each
worker process uvicorn starts.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import FrameType
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.types import ASGIApp

from workly import __version__, logs
from workly.api import endpoints, events, health, operations, queues, reference, schedules, tasks
from workly.api.fast_enqueue import FastEnqueue
from workly.config import Settings
from workly.errors import ConfigError
from workly.service import Service
from workly.ui.pages import install_dashboard
from workly.web.browser_guards import LocalHostsOnly, SameOriginWrites
from workly.web.guards import BearerTokens, RequestSizeLimit
from workly.web.problems import install_problem_handlers
from workly.web.tokens import TokenSet


def create_app(service: Service, *, anonymous: bool = False) -> ASGIApp:
    """The app serving ``service``; nothing connects until its lifespan starts the service.
    Without API tokens it refuses to build unless ``anonymous`` says so (`workly dev`): an
    app served some other way (uvicorn with the factory, say) must not end up open by
    accident. (Tests that start the service themselves call the app without a lifespan.)"""
    settings = service.settings
    if not settings.tokens() and not anonymous:
        raise ConfigError("WORKLY_API_TOKENS is required: the API answers only requests with a bearer token")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with _second_signal_stops_now(service):  # from the start: a Ctrl-C may come while it starts
            await service.start()
            try:
                yield
            finally:
                await service.stop()

    app = FastAPI(
        title="Workly",
        version=__version__,
        summary="HTTP delivery service: webhook dispatcher and HTTP task queue",
        lifespan=lifespan,
        docs_url=None,  # workly/api/reference.py serves /docs
        redoc_url=None,
    )
    app.state.service = service
    install_problem_handlers(app)
    app.include_router(tasks.router)
    app.include_router(queues.router)
    app.include_router(endpoints.router)
    app.include_router(events.router)
    app.include_router(operations.router)
    app.include_router(schedules.router)
    app.include_router(health.router)
    app.include_router(health.metrics_router)
    app.include_router(reference.router)
    app.add_api_route("/", _to_the_dashboard, methods=["GET"], include_in_schema=False)
    tokens = TokenSet(settings.tokens())
    install_dashboard(app, tokens)
    if tokens:
        _declare_bearer_auth(app)
    return _guarded(FastEnqueue(app, service), settings, tokens)


# A signal within this long of the first is the same stop: a Ctrl-C in a terminal (or
# systemd's stop) signals every process of the group, and under --workers the supervisor
# passes it on to the workers as well, a fraction of a second later.
SAME_STOP_SECONDS = 1.0


@contextmanager
def _second_signal_stops_now(service: Service) -> Iterator[None]:
    """While the app serves, the first SIGINT or SIGTERM goes to the server (uvicorn: it stops
    taking requests, then the service stops, giving deliveries WORKLY_SHUTDOWN_GRACE);
    another one, a second or more later, stops the service at once, instead of uvicorn's
    forced exit, which would skip the service's stop (results unrecorded, nothing closed).
    Only the main thread can handle signals; elsewhere (an app served in a test's thread)
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    first: float | None = None
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal first
        now = time.monotonic()
        if first is None:
            first = now
            server = before[signal.Signals(signum)]
            if callable(server):  # uvicorn's: it stops serving, then the lifespan stops the service
                server(signum, frame)
            else:  # no handler of a server's: what the signal would have done
                signal.signal(signum, signal.SIG_DFL)
                signal.raise_signal(signum)
        elif now - first >= SAME_STOP_SECONDS:
            loop.call_soon_threadsafe(service.stop_now)

    for sig in before:
        signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


async def _to_the_dashboard() -> RedirectResponse:
    """A browser pointed at the server's address lands on the dashboard."""
    return RedirectResponse("/ui", status_code=303)


def _declare_bearer_auth(app: FastAPI) -> None:
    """Say in the OpenAPI schema that the API takes a bearer token, so the Authorize button of
    /docs sends it with every "Try it out"."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()  # FastAPI's schema, cached in app.openapi_schema
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "one of WORKLY_API_TOKENS"}
            }
            schema["security"] = [{"bearer": []}]
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


def _guarded(app: ASGIApp, settings: Settings, tokens: TokenSet) -> ASGIApp:
    """Header checks first (a refused caller cannot make the server read a body), then the
    size limit. Without tokens (`workly dev`) only IP addresses and localhost are answered."""
    limited = RequestSizeLimit(app, settings.max_request_bytes)
    if not tokens:
        return LocalHostsOnly(SameOriginWrites(limited))
    public = (("/health",) if settings.public_health else ()) + (
        ("/metrics",) if settings.public_metrics else ()
    )
    return SameOriginWrites(BearerTokens(limited, tokens, public))


def app_from_env() -> ASGIApp:
    """uvicorn factory (``workly.app:app_from_env``): settings from WORKLY_* variables.
    Each worker process uvicorn spawns builds its app here, so it sets up logging too."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    return create_app(Service(settings))
