"""The webhook platform's use cases as one principal may call them: a tenant-scoped key
sees its tenant's endpoints, events and their deliveries only (decisions.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from workly.errors import EndpointNotFound, EventNotFound
from workly.event_filter import EventFilter, filter_json
from workly.models import Task, TaskStatus
from workly.operations import Operation
from workly.service.access.decisions import Access
from workly.service.bulk_operations import BulkOperationUseCases
from workly.service.webhooks import WebhookUseCases
from workly.webhooks import Endpoint, EndpointSpec, Event, NewEvent, Published


def spec_changes(spec: EndpointSpec) -> dict[str, Any]:
    """An endpoint's fields as its audit entry records them (redacted there)."""
    delivery = {k: v for k, v in asdict(spec.delivery).items() if v is not None and k != "paused"}
    return audited({"url": spec.url, "description": spec.description, "event_types": spec.event_types,
                    "tenant": spec.tenant, "headers": spec.headers, "payload_format": spec.payload_format,
                    "filter": spec.filter, **delivery})  # fmt: skip


def audited(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Changes as JSON can hold them: a filter as it was given."""
    shown = dict(changes)
    if isinstance(shown.get("filter"), EventFilter):
        shown["filter"] = filter_json(shown["filter"].source)
    return shown


class ScopedWebhooks:
    def __init__(self, webhooks: WebhookUseCases, operations: BulkOperationUseCases, access: Access) -> None:
        self._webhooks = webhooks
        self._operations = operations
        self._access = access

    async def _owner(self, endpoint_id: str, changes: bool = False) -> str | None:
        """The endpoint's tenant, once the principal is seen to see it (else EndpointNotFound,
        as for none). Read for a tenant-scoped principal, and for a change (its audit entry
        names the tenant); an untenanted principal's read decides on its role alone."""
        if self._access.tenant is None and not changes:
            return None
        endpoint = await self._webhooks.get_endpoint(endpoint_id)
        self._access.see(endpoint.spec.tenant, EndpointNotFound(endpoint_id))
        return endpoint.spec.tenant

    # --- endpoints -----------------------------------------------------------------
    async def create_endpoint(self, spec: EndpointSpec) -> Endpoint:
        access = self._access
        owned = replace(spec, tenant=access.owner(spec.tenant, "endpoint.create"))
        access.act("endpoint.create", "write", tenant=owned.tenant, changes=spec_changes(owned))
        endpoint = await self._webhooks.create_endpoint(owned)
        access.note.target = endpoint.id
        return endpoint

    async def get_endpoint(self, endpoint_id: str) -> Endpoint:
        tenant = await self._owner(endpoint_id)
        self._access.act("endpoint.read", "read", endpoint_id, tenant)
        return await self._webhooks.get_endpoint(endpoint_id)

    async def list_endpoints(
        self, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Endpoint], int | None]:
        self._access.act("endpoint.list", "read")
        listed, any_found = self._access.listed_tenant(tenant)
        if not any_found:
            return [], None
        return await self._webhooks.list_endpoints(listed, limit, before_seq)

    async def update_endpoint(self, endpoint_id: str, changes: Mapping[str, Any]) -> Endpoint:
        tenant = await self._owner(endpoint_id, changes=True)
        access = self._access
        access.act("endpoint.update", "write", endpoint_id, tenant, audited(changes))
        if "tenant" in changes:
            access.keep_tenant(changes["tenant"], "endpoint.update")
        return await self._webhooks.update_endpoint(endpoint_id, changes)

    async def delete_endpoint(self, endpoint_id: str) -> None:
        tenant = await self._owner(endpoint_id, changes=True)
        self._access.act("endpoint.delete", "write", endpoint_id, tenant)
        await self._webhooks.delete_endpoint(endpoint_id)

    async def endpoint_public_keys(self, endpoint_id: str) -> list[str]:
        tenant = await self._owner(endpoint_id)
        self._access.act("endpoint.public_key", "read", endpoint_id, tenant)
        return await self._webhooks.endpoint_public_keys(endpoint_id)

    async def endpoint_secret(self, endpoint_id: str) -> str:
        tenant = await self._owner(endpoint_id)
        self._access.act("endpoint.secret", "read_secret", endpoint_id, tenant)
        return await self._webhooks.endpoint_secret(endpoint_id)

    async def enable_endpoint(self, endpoint_id: str) -> Endpoint:
        tenant = await self._owner(endpoint_id, changes=True)
        self._access.act("endpoint.enable", "write", endpoint_id, tenant)
        return await self._webhooks.enable_endpoint(endpoint_id)

    async def disable_endpoint(self, endpoint_id: str) -> Endpoint:
        tenant = await self._owner(endpoint_id, changes=True)
        self._access.act("endpoint.disable", "write", endpoint_id, tenant)
        return await self._webhooks.disable_endpoint(endpoint_id)

    async def recover_endpoint(self, endpoint_id: str, since: datetime) -> int:
        tenant = await self._owner(endpoint_id, changes=True)
        self._access.act("endpoint.recover", "write", endpoint_id, tenant, {"since": since.isoformat()})
        return await self._webhooks.recover_endpoint(endpoint_id, since)

    async def replay_endpoint(self, endpoint_id: str, since: datetime) -> Operation:
        tenant = await self._owner(endpoint_id, changes=True)
        self._access.act("endpoint.replay", "write", endpoint_id, tenant, {"since": since.isoformat()})
        operation = await self._operations.replay_endpoint(endpoint_id, since)
        self._access.note.changes["operation"] = operation.id
        return operation

    async def send_test(self, endpoint_id: str, event_type: str | None) -> Task:
        tenant = await self._owner(endpoint_id, changes=True)
        self._access.act("endpoint.test", "write", endpoint_id, tenant, {"type": event_type})
        return await self._webhooks.send_test(endpoint_id, event_type)

    async def list_endpoint_tasks(
        self, endpoint_id: str, status: TaskStatus | None, limit: int, before_seq: int | None
    ) -> tuple[list[Task], int | None]:
        tenant = await self._owner(endpoint_id)
        self._access.act("endpoint.tasks", "read_messages", endpoint_id, tenant)
        return await self._webhooks.list_endpoint_tasks(endpoint_id, status, limit, before_seq)

    # --- events --------------------------------------------------------------------
    async def publish(self, event: NewEvent) -> Published:
        access = self._access
        access.act("event.publish", "publish", tenant=event.tenant)
        return await self._webhooks.publish(
            replace(event, tenant=access.owner(event.tenant, "event.publish"))
        )

    async def get_event(self, event_id: str) -> Event:
        event = await self._webhooks.get_event(event_id)
        self._access.see(event.tenant, EventNotFound(event_id))
        self._access.act("event.read", "read_messages", event_id, event.tenant)
        return event

    async def delete_event(self, event_id: str) -> int:
        event = await self._webhooks.get_event(event_id)
        self._access.see(event.tenant, EventNotFound(event_id))
        self._access.act("event.delete", "write", event_id, event.tenant)
        return await self._webhooks.delete_event(event_id)

    async def list_events(
        self, event_type: str | None, tenant: str | None, limit: int, before_seq: int | None
    ) -> tuple[list[Event], int | None]:
        self._access.act("event.list", "read_messages")
        listed, any_found = self._access.listed_tenant(tenant)
        if not any_found:
            return [], None
        return await self._webhooks.list_events(event_type, listed, limit, before_seq)
