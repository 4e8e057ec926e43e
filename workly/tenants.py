"""Tenants: the customers a SaaS sends webhooks to (docs/tenants.md).

A tenant's id is the ``tenant`` string endpoints, events and tasks already carry. A tenant
named by an endpoint or an event that was never created is created with these defaults
on first use, as queues are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

MAX_METADATA = 16  # entries
MAX_METADATA_TEXT = 255  # characters of a key or a value


@dataclass(frozen=True, slots=True)
class TenantSpec:
    """What a client sets on a tenant."""

    name: str | None = None  # None: shown as its id
    metadata: dict[str, str] = field(default_factory=dict)
    retention: int | None = None  # seconds its data is kept (None: the server's settings)
    max_endpoints: int | None = None  # None: no limit


@dataclass(frozen=True, slots=True)
class Tenant:
    tenant: str
    spec: TenantSpec
    endpoints: int  # how many endpoints it has now
    created_at: datetime
    updated_at: datetime


def check_metadata(metadata: dict[str, str]) -> dict[str, str]:
    if len(metadata) > MAX_METADATA:
        raise ValueError(f"metadata holds at most {MAX_METADATA} entries")
    for key, value in metadata.items():
        if not 0 < len(key) <= MAX_METADATA_TEXT or len(value) > MAX_METADATA_TEXT:
            raise ValueError(f"metadata keys are 1 to {MAX_METADATA_TEXT} characters, values at most as many")
    return metadata
