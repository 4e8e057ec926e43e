"""Request bodies of the tenant and API key routes (docs/tenants.md, docs/security.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import Field, field_validator, model_validator

from workly.access import Role
from workly.api.schemas import Retention, ShortText, _Strict, check_run_at
from workly.api_keys import ApiKeySpec
from workly.tenants import MAX_METADATA, TenantSpec, check_metadata


class TenantIn(_Strict):
    name: ShortText | None = Field(default=None, description="shown instead of the id")
    metadata: dict[str, str] = Field(
        default_factory=dict, description=f"string to string, at most {MAX_METADATA}"
    )
    retention: Retention | None = None
    max_endpoints: int | None = Field(default=None, ge=0, le=1_000_000, description="null: no limit")

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, str]) -> dict[str, str]:
        return check_metadata(value)

    def spec(self) -> TenantSpec:
        return TenantSpec(self.name, self.metadata, self.retention, self.max_endpoints)


class TenantPatchIn(TenantIn):
    """Some fields: only those given change (``metadata`` is replaced whole)."""

    @model_validator(mode="after")
    def _metadata_not_null(self) -> TenantPatchIn:
        if "metadata" in self.model_fields_set and self.metadata is None:
            raise ValueError("metadata cannot be null: give {} to clear it")
        return self

    def changes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.model_fields_set}


class KeyIn(_Strict):
    name: ShortText = Field(description="who or what holds it, e.g. support-team")
    role: Role = Field(description="admin, reader or publisher")
    tenant: ShortText | None = Field(default=None, description="null: every tenant's objects")
    expires_at: datetime | None = Field(default=None, description="RFC 3339; null: never")

    @field_validator("expires_at")
    @classmethod
    def _ahead(cls, value: datetime | None) -> datetime | None:
        expires = check_run_at(value, "expires_at")
        if expires is not None and expires <= datetime.now(UTC):
            raise ValueError("expires_at is in the past: such a key could never be used")
        return expires

    def spec(self) -> ApiKeySpec:
        return ApiKeySpec(self.name, self.role, self.tenant, self.expires_at)
