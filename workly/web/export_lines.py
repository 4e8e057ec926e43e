"""A tenant's export as JSON Lines (docs/retention.md), for the API and the dashboard alike:
one object a line, its ``kind`` first, the fields the API shows for it (an endpoint never
with its secret)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse

from workly.json_text import to_json
from workly.models import Attempt, Task
from workly.service.export import ExportItem
from workly.task_json import attempt_json, task_json
from workly.web.webhook_representation import endpoint_json, event_json
from workly.webhooks import Endpoint, Event

JSONL = "application/jsonl"


def export_response(items: AsyncIterator[ExportItem]) -> StreamingResponse:
    """Streamed as it is read: a page of the tenant in memory at a time. A failure mid-way
    ends the response without its last chunk, so a client sees a cut transfer."""
    download = {"content-disposition": 'attachment; filename="tenant.jsonl"'}
    return StreamingResponse(_lines(items), media_type=JSONL, headers=download)


async def _lines(items: AsyncIterator[ExportItem]) -> AsyncIterator[bytes]:
    async for kind, item in items:
        yield (to_json({"kind": kind, **_shown(item)}) + "\n").encode()


def _shown(item: Endpoint | Event | Task | Attempt) -> dict[str, Any]:
    if isinstance(item, Endpoint):
        return endpoint_json(item)
    if isinstance(item, Event):
        return event_json(item)
    if isinstance(item, Task):
        return task_json(item)
    return {"task_id": item.task_id, **attempt_json(item)}  # a line stands alone: whose attempt
