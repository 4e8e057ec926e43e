"""Runtime configuration, read from ``WORKLY_*`` environment variables.

Nothing here is instantiated at import time: the CLI and the app factory build a
``Settings`` when they start, so tests can build their own.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from workly.breaker import BreakerRules
from workly.database_url import (
    DEFAULT_SCHEMA,
    SCHEMES,
    check_schema_name,
    is_sqlite,
    split_pool_size,
    sqlite_path,
)
from workly.errors import ConfigError
from workly.lifecycle import MAX_RETENTION
from workly.secret_box import parse_keys
from workly.ssrf_guard import OutboundPolicy, Proxy, parse_allow_list, parse_proxy

# Characters an API token must have for `workly serve`: `openssl rand -hex 32` gives 64; a short
# one can be guessed, and the failed-authentication limit only slows that down.
MIN_TOKEN_LENGTH = 32


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WORKLY_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        repr=False,  # it may hold a secret
        description="postgresql://… or sqlite:///path (required by `workly serve`)",
    )
    database_schema: str = Field(
        default="public",
        description="PostgreSQL schema holding Workly's tables and SQL functions (created by "
        "`workly migrate`); another schema keeps them apart from the application's own",
    )
    sql_poll_interval: float = Field(
        default=0.005,
        ge=0,
        le=60,
        description="PostgreSQL: seconds between looks for tasks the SQL functions enqueued "
        "(enqueue_task, publish_event) and committed; 0 = every WORKLY_POLL_INTERVAL",
    )
    secret_key: str | None = Field(
        default=None,
        repr=False,  # a secret
        description="base64 of 32 random bytes: signing secrets are stored encrypted with it (AES-GCM); "
        "several space separated during a rotation, the first encrypts",
    )
    signing_secret: str | None = Field(
        default=None,
        repr=False,  # it may hold a secret
        description="whsec_… secrets and whsk_… ed25519 keys, space separated; the first is current, "
        "all sign (rotation)",
    )
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = Field(
        default="FULL",
        description="SQLite PRAGMA synchronous for acknowledged writes (FULL: a 201 survives power loss)",
    )
    shutdown_grace: float = Field(
        default=25.0,
        ge=0,
        description="seconds deliveries in flight get to finish on SIGTERM/SIGINT; the rest keep their "
        "lease and come back through the reaper",
    )
    retention: float = Field(
        default=7 * 86400,
        ge=0,
        le=MAX_RETENTION,
        description="seconds succeeded tasks (and their attempts) are kept, and events none of whose "
        "deliveries is left; 0 = forever",
    )
    failed_retention: float = Field(
        default=30 * 86400,
        ge=0,
        le=MAX_RETENTION,
        description="seconds failed and canceled tasks (and their attempts) are kept; 0 = forever",
    )
    event_types: Literal["open", "strict"] = Field(
        default="open",
        description="open: any event type may be published (one with a schema is validated); strict: only "
        "catalogue types, by the API and SQL's publish_event alike",
    )
    audit_retention: float = Field(
        default=90 * 86400,
        ge=0,
        le=MAX_RETENTION,
        description="seconds audit log entries are kept; 0 = forever",
    )
    reap_interval: float = Field(
        default=5.0, ge=0, description="seconds between reaper runs (expired leases back to ready); 0 = never"
    )
    vacuum_interval: float | None = Field(
        default=None,
        ge=0,
        description="PostgreSQL: seconds between VACUUMs of Workly's tables; unset = every 10 s "
        "only when the server's autovacuum is off; 0 = never",
    )
    reindex_interval: float = Field(
        default=60.0,
        ge=0,
        description="PostgreSQL: seconds between checks for indexes that retention left bloated, "
        "each rebuilt with REINDEX CONCURRENTLY; 0 = never",
    )
    dispatch: bool = Field(
        default=True, description="run the dispatcher in this process (false: API only, no deliveries)"
    )
    max_in_flight: int = Field(default=100, ge=1, description="deliveries in flight per process")
    eager_dispatch: bool = Field(
        default=True,
        description="an enqueue leases the tasks a claim would take at once to this process's "
        "dispatcher in its own transaction (false: every task waits for a claim)",
    )
    poll_interval: float = Field(default=1.0, gt=0, description="seconds between claims when idle")
    lease_margin: float = Field(
        default=30.0,
        gt=0,
        description="seconds a lease outlives the attempt timeout; at least 3 times WORKLY_DB_TIMEOUT",
    )
    db_timeout: float = Field(
        default=10.0,
        gt=0,
        description="seconds one database statement may take (PostgreSQL) or wait for a lock (SQLite)",
    )
    result_batch_max: int = Field(default=500, ge=1, description="attempt results per group commit")
    ready_stall_seconds: float = Field(
        default=10.0, gt=0, description="/health/ready fails when the dispatcher has not ticked for this long"
    )
    response_snippet_bytes: int = Field(default=2048, ge=0, description="response bytes kept per attempt")
    log_level: Literal["critical", "error", "warning", "info", "debug"] = Field(
        default="info", description="critical, error, warning, info or debug (any case)"
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="text lines, or one JSON object per line (json)"
    )
    api_tokens: str | None = Field(
        default=None,
        repr=False,  # it may hold a secret
        description="bearer tokens the API accepts, space separated (several at once for rotation); "
        "required by `workly serve`",
    )
    public_health: bool = Field(default=True, description="/health/* answers without a token")
    public_metrics: bool = Field(default=False, description="/metrics answers without a token")
    outbound_allow: str | None = Field(
        default=None,
        description="addresses and CIDRs deliveries may reach besides public ones, space separated "
        "(unset: none for `workly serve`, loopback for `workly dev`)",
    )
    outbound_proxy: str | None = Field(
        default=None,
        repr=False,  # it may hold a secret
        description="http://[user:password@]host:port of an egress proxy every delivery goes through "
        "(CONNECT tunnels for https receivers)",
    )
    outbound_ca_file: str | None = Field(
        default=None,
        description="PEM file of CA certificates deliveries trust besides the system's (internal receivers)",
    )
    outbound_client_cert: str | None = Field(
        default=None,
        description="PEM client certificate (and chain) offered to receivers that ask for one (mTLS)",
    )
    outbound_client_key: str | None = Field(
        default=None,
        description="PEM private key of WORKLY_OUTBOUND_CLIENT_CERT, unencrypted (unset: inside the "
        "certificate's file)",
    )
    max_body_bytes: int = Field(
        default=256 * 1024, ge=1, le=64 * 1024 * 1024, description="largest task body, in bytes (else 413)"
    )
    max_request_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="largest API request body, in bytes; refused (413) before it is read whole",
    )
    metrics_per_endpoint: bool = Field(
        default=False,
        description="a /metrics series per endpoint; else every endpoint's deliveries share the label "
        'queue="endpoints" (10,000 endpoints would be 10,000 series per metric)',
    )
    max_connections: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="open HTTP connections per process; one more is closed as it is accepted",
    )

    breaker_threshold: int = Field(
        default=5,
        ge=1,
        description="consecutive failed attempts after which a receiver's circuit breaker opens "
        "(an endpoint; for plain tasks, a destination origin)",
    )
    breaker_cooldown: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="seconds an open breaker holds its tasks before one probe; doubled after each "
        "failed probe, up to 1 hour",
    )
    endpoint_disable_after: float = Field(
        default=5 * 86400,
        gt=0,
        description="seconds an endpoint may fail without a single success before it is disabled",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_in_any_case(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _known_scheme(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(SCHEMES):
            raise ValueError("must start with postgresql://, postgres:// or sqlite:///")
        try:
            sqlite_path(value) if is_sqlite(value) else split_pool_size(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("sql_poll_interval")
    @classmethod
    def _poll_floor(cls, value: float) -> float:
        if 0 < value < 0.001:
            raise ValueError("must be 0 or at least 0.001 (a look is a statement on the database)")
        return value

    @field_validator("secret_key")
    @classmethod
    def _secret_keys(cls, value: str | None) -> str | None:
        try:
            parse_keys(value)
        except ConfigError as exc:  # its message names the key by position, never its value
            raise ValueError(str(exc).removeprefix("WORKLY_SECRET_KEY: ")) from None
        return value

    @field_validator("database_schema")
    @classmethod
    def _schema_name(cls, value: str) -> str:
        try:
            check_schema_name(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _schema_only_on_postgres(self) -> Settings:
        if self.database_schema != DEFAULT_SCHEMA and self.database_url and is_sqlite(self.database_url):
            raise ValueError("WORKLY_DATABASE_SCHEMA applies to PostgreSQL only; unset it for SQLite")
        return self

    @model_validator(mode="after")
    def _margin_covers_lease_writes(self) -> Settings:
        # The heartbeat runs every margin/3 s and each lease write (heartbeat, result) may
        # take up to db_timeout. A shorter interval than one statement's worst case would
        # let heartbeats pile up behind a slow database, and a result recorded after its
        # attempt timed out could land after the lease: then a live delivery is redone.
        if self.lease_margin < 3 * self.db_timeout and not math.isclose(
            self.lease_margin, 3 * self.db_timeout
        ):
            raise ValueError(
                f"WORKLY_LEASE_MARGIN ({self.lease_margin:g} s) must be at least 3 times WORKLY_DB_TIMEOUT "
                f"({self.db_timeout:g} s): leases are renewed every margin/3 s and each renewal may "
                "take up to the database timeout"
            )
        return self

    @field_validator("outbound_allow")
    @classmethod
    def _cidrs(cls, value: str | None) -> str | None:
        if value is not None:
            parse_allow_list(value)  # raises a ValueError naming the bad item
        return value

    @field_validator("outbound_proxy")
    @classmethod
    def _proxy_url(cls, value: str | None) -> str | None:
        if value:
            parse_proxy(value)  # raises a ValueError saying what is wrong
        return value or None

    def proxy(self) -> Proxy | None:
        return parse_proxy(self.outbound_proxy) if self.outbound_proxy else None

    def tokens(self) -> list[str]:
        return (self.api_tokens or "").split()

    def short_tokens(self) -> list[int]:
        """The positions (from 1) of the tokens shorter than MIN_TOKEN_LENGTH: `workly serve`
        refuses them (a token is never named, not even in part)."""
        return [n for n, token in enumerate(self.tokens(), 1) if len(token) < MIN_TOKEN_LENGTH]

    def outbound_policy(self) -> OutboundPolicy:
        return OutboundPolicy(parse_allow_list(self.outbound_allow or ""))

    def breaker_rules(self) -> BreakerRules:
        return BreakerRules(
            threshold=self.breaker_threshold,
            cooldown=self.breaker_cooldown,
            disable_after=self.endpoint_disable_after,
        )

    def signing_secrets(self) -> list[str]:
        return (self.signing_secret or "").split()
