"""The events Workly publishes about itself (``workly.*``, docs/webhooks.md): an endpoint
disabled or enabled, a task that failed for good. Announced in the background, so that the
change or the results that cause one never wait for it; stored only when an endpoint takes
it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

from workly.clock import Clock
from workly.errors import StorageConflict
from workly.ids import new_id, new_task_id
from workly.models import AttemptResult, RecordSummary, Task
from workly.storage.contract import TaskStore, WebhookStore
from workly.webhooks import Endpoint, NewEvent, is_workly_event

log = logging.getLogger("workly.webhooks")


class OwnEvents:
    def __init__(
        self, tasks: TaskStore, webhooks: WebhookStore, clock: Clock, work_available: Callable[[], None]
    ) -> None:
        self._tasks = tasks
        self._webhooks = webhooks
        self._clock = clock
        self._work_available = work_available
        self._in_flight: set[asyncio.Task[None]] = set()

    def endpoint_changed(self, endpoint: Endpoint) -> None:
        """An endpoint was enabled or disabled by hand."""
        kind = "workly.endpoint.enabled" if endpoint.enabled else "workly.endpoint.disabled"
        self._spawn(self._publish(kind, endpoint_data(endpoint)))

    def results_recorded(self, results: Sequence[AttemptResult], summary: RecordSummary) -> None:
        """Endpoints the results disabled, and tasks that failed for good."""
        for endpoint_id, _reason in summary.disabled:
            self._spawn(self._announce_disabled(endpoint_id))
        failed = [r for r in results if r.outcome == "failed"]
        if failed:
            self._spawn(self._announce_failures(failed))

    async def drain(self) -> None:
        """Wait for the announcements in flight (the service is stopping)."""
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def _announce_disabled(self, endpoint_id: str) -> None:
        endpoint = await self._webhooks.get_endpoint(endpoint_id)
        if endpoint is not None:
            await self._publish("workly.endpoint.disabled", endpoint_data(endpoint))

    async def _announce_failures(self, failed: Sequence[AttemptResult]) -> None:
        for result in failed:
            task = await self._tasks.get_task(result.task_id)
            if task is None or task.status != "failed":  # a stale result, or redriven since
                continue
            tenant = task.tenant
            if task.event_id is not None:
                # Never about Workly's own events: a failing subscriber's failure notices
                # would make more failure notices, without end.
                event = await self._webhooks.get_event(task.event_id)
                if event is None or is_workly_event(event.type):
                    continue
                tenant = event.tenant
            # The tenant it names is how its erasure finds the notice (docs/retention.md).
            data = {"tenant": tenant, "task": _task_data(task), "attempt": _attempt_data(result)}
            await self._publish("workly.task.failed", data)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._in_flight.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("could not publish one of Workly's own events: %s", task.exception())

    async def _publish(self, event_type: str, data: dict[str, Any]) -> None:
        now = self._clock.now()
        payload = {"type": event_type, "timestamp": _rfc3339(now), "data": data}
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        # Stored only when an endpoint takes it: an outage with nobody subscribed must not
        # fill the events table with notices no one reads.
        event = NewEvent(id=new_id("evt"), type=event_type, payload=body, content_type="application/json")
        try:
            published = await self._webhooks.publish(event, now, new_task_id, only_if_delivered=True)
        except StorageConflict:
            # A subscriber deleted between reading the subscribers and storing the deliveries
            # (the same event id: a retry stores it at most once).
            published = await self._webhooks.publish(
                event, self._clock.now(), new_task_id, only_if_delivered=True
            )
        if published is not None:
            self._work_available()


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def endpoint_data(endpoint: Endpoint) -> dict[str, Any]:
    spec, health = endpoint.spec, endpoint.health
    return {
        "id": endpoint.id,
        "url": spec.url,
        "description": spec.description,
        "tenant": spec.tenant,
        "event_types": None if spec.event_types is None else list(spec.event_types),
        "enabled": endpoint.enabled,
        "health": {
            "state": health.state,
            "consecutive_failures": health.consecutive_failures,
            "disabled_reason": health.disabled_reason,
        },
    }


def _task_data(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "queue": task.queue,
        "url": task.url,
        "method": task.method,
        "status": task.status,
        "attempts": task.attempts,
        "max_attempts": task.max_attempts,
        "event_id": task.event_id,
        "endpoint_id": task.endpoint_id,
        "last_status_code": task.last_status_code,
        "last_error": task.last_error,
        "created_at": _rfc3339(task.created_at),
    }


def _attempt_data(result: AttemptResult) -> dict[str, Any]:
    return {
        "attempt": result.attempt,
        "started_at": _rfc3339(result.started_at),
        "finished_at": _rfc3339(result.finished_at),
        "status_code": result.status_code,
        "error": result.error,
    }
