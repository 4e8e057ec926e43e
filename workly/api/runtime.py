"""What the routes need at request time, injected through ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from workly.clock import Clock
from workly.config import Settings
from workly.dispatch.dispatcher import Dispatcher
from workly.enqueuer import Enqueuer
from workly.metrics import Metrics
from workly.storage.base import Storage


@dataclass
class Runtime:
    settings: Settings
    storage: Storage
    dispatcher: Dispatcher
    enqueuer: Enqueuer
    clock: Clock
    metrics: Metrics


async def get_runtime(request: Request) -> Runtime:
    # async on purpose: FastAPI runs a plain-def dependency in a worker thread, per request.
    runtime: Runtime = request.app.state.runtime
    return runtime
