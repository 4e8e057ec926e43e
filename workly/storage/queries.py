"""Named SQL blocks, per dialect (``<dialect>/sql/core.sql`` for tasks, queues, claims and
migrations, ``webhooks.sql`` for the webhook platform, ``operations.sql`` for bulk
operations and callbacks, ``schedules.sql`` for schedules, ``stats.sql`` for the counts
and charts, ``access.sql`` for tenants, API keys and the audit log, ``catalogue.sql`` for
event types, ``lifecycle.sql`` for retention, deletes, erasure and export; the same file
names and query names in ``postgres/`` and ``sqlite/``), loaded once, looked up by typed
names and bound by parameter name.

A block starts with a line ``-- name: <query_name>`` and runs to the next such line.
Parameters are written ``:name`` in both dialects. SQLite binds them by name itself; for
PostgreSQL (asyncpg takes ``$1, $2, …``) each name becomes one ``$n`` when the file is
loaded, and ``Query.args`` puts the values in that order. A call that gives a name the
query lacks, or leaves one out, fails at once instead of binding the wrong value.

Each dialect's queries are a frozen dataclass with one field per name: a typo in the code
fails mypy, and a block missing from (or unknown to) the file fails the first load.
Both files share the names of ``CommonQueries``; SQLite may run a query as several
statements named ``<query>_<part>`` (a test checks the pairing).

A block may write the task's columns as placeholders (``@task_columns@``, ``@task_arrays@``,
…: storage/task_shape.py declares them once); they are expanded before the parameters are
found, outside comments and quoted text. An unknown placeholder fails the load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from typing import Any, TypeVar

from workly.storage import task_shape
from workly.storage.task_shape import Dialect as Dialect  # defined there: task_shape expands per dialect

_NAME_LINE = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
# Comments and quoted text are kept as they are; a parameter is ":name" preceded by neither
# another ':' (a PostgreSQL cast, "::text") nor a letter or digit (an array slice, "a[1:n]").
# What this small lexer cannot read safely is refused: block comments, dollar quotes, E''
# strings (backslash escapes) and positional parameters.
_LEXEME = re.compile(
    r"--[^\n]*|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(?<![:\w]):([A-Za-z_]\w*)"
    r"|(?P<refused>\$\d+|/\*|\$\w*\$|\b[Ee]')"
)
# The task shape's placeholders ("@task_values(r)@"), found as the parameters are: outside
# comments and quoted text. The quoted alternatives capture nothing, so the placeholder's
# name and argument are groups 1 and 2, as task_shape.expand reads them.
_PLACEHOLDER_LEXEME = re.compile(
    r"--[^\n]*|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|" + task_shape.PLACEHOLDER.pattern
)


class QueryParameterError(TypeError):
    """A query was called with parameters other than the ones it names: a programming error."""


@dataclass(frozen=True, slots=True)
class Query:
    name: str
    sql: str  # as the driver takes it: "$n" placeholders (PostgreSQL) or ":name" (SQLite)
    params: tuple[str, ...]  # the parameter names, in "$n" order
    # The same names as a set, made once: every call compares against it.
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(self.params))

    def args(self, values: Mapping[str, Any]) -> list[Any]:
        """The values in placeholder order (PostgreSQL)."""
        self.check(values)
        return [values[name] for name in self.params]

    def check(self, values: Mapping[str, Any]) -> Mapping[str, Any]:
        """``values`` itself, once its names are exactly the query's (SQLite binds by name)."""
        if values.keys() != self.names:
            missing = sorted(self.names - values.keys())
            unknown = sorted(values.keys() - self.names)
            raise QueryParameterError(f"query {self.name}: missing {missing}, unknown {unknown}")
        return values


@dataclass(frozen=True, slots=True)
class CommonQueries:
    """The queries both dialects define under the same name."""

    get_tasks_by_ids: Query
    get_tasks_by_idempotency_keys: Query
    get_task: Query
    list_tasks: Query
    list_tasks_by_status: Query
    list_all_tasks: Query
    list_attempts: Query
    cancel_task: Query
    retry_task: Query
    claim_tasks: Query
    get_leased_tasks: Query
    record_results: Query
    get_queue: Query
    get_queue_for_update: Query
    list_queues: Query
    count_tasks_of_queue: Query
    count_tasks: Query
    put_queue: Query
    update_queue: Query
    delete_queue: Query
    purge_queue: Query
    ping: Query
    create_schema_version: Query
    schema_version_exists: Query
    lock_migrations: Query
    get_schema_version: Query
    set_schema_version: Query
    get_schema_repeatables: Query
    set_schema_repeatable: Query
    reap_expired: Query
    extend_leases: Query
    # The webhook platform (<dialect>/sql/webhooks.sql).
    insert_endpoint: Query
    get_endpoint: Query
    lock_endpoint: Query
    list_endpoints: Query
    list_endpoints_by_tenant: Query
    update_endpoint: Query
    update_endpoint_task_urls: Query
    set_endpoint_enabled: Query
    set_queue_paused: Query
    publish_targets: Query
    publish_event: Query
    get_event: Query
    get_event_by_idempotency_key: Query
    event_deliveries: Query
    list_events: Query
    recover_endpoint: Query
    insert_breakers: Query
    lock_breakers: Query
    save_breaker: Query
    reset_breaker: Query
    delete_breaker: Query
    hold_endpoint_tasks: Query
    hold_origin_tasks: Query
    release_held_tasks: Query
    due_probes: Query
    release_probe: Query
    count_endpoints_by_state: Query
    free_stranded: Query
    publish_targets_untenanted: Query
    endpoint_has_tasks: Query
    insert_test_delivery: Query
    # Bulk operations and callbacks (<dialect>/sql/operations.sql).
    insert_operation: Query
    get_operation: Query
    list_operations: Query
    take_operation: Query
    release_operation: Query
    lock_operation: Query
    operation_chunk: Query
    retry_tasks: Query
    cancel_tasks: Query
    advance_operation: Query
    due_callbacks: Query
    clear_callbacks: Query
    insert_replay_operation: Query
    lock_replay_endpoint: Query
    replay_events: Query
    replay_events_untenanted: Query
    replay_deliveries: Query
    fail_operation: Query
    running_replay: Query
    # Schedules (<dialect>/sql/schedules.sql).
    insert_schedule: Query
    get_schedule: Query
    list_schedules: Query
    lock_schedule: Query
    lock_due_schedules: Query
    update_schedule: Query
    advance_schedules: Query
    delete_schedule: Query
    next_schedule_at: Query
    # Counts and charts (<dialect>/sql/stats.sql).
    fold_task_counts: Query
    miscounted_queues: Query
    clear_task_counts: Query
    count_tasks_into_counts: Query
    add_delivery_minute: Query
    delivery_minutes: Query
    delivery_minutes_of_scope: Query
    prune_delivery_minutes: Query
    delete_queue_minutes: Query
    # Tenants, API keys and the audit log (<dialect>/sql/access.sql).
    ensure_tenant: Query
    put_tenant: Query
    update_tenant: Query
    get_tenant: Query
    lock_tenant: Query
    count_tenant_endpoints: Query
    list_tenants: Query
    insert_key: Query
    get_key: Query
    key_by_digest: Query
    list_keys: Query
    revoke_key: Query
    touch_key: Query
    insert_audit: Query
    list_audit: Query
    prune_audit: Query
    insert_session: Query
    session_by_digest: Query
    end_session: Query
    prune_sessions: Query
    # The event catalogue and shared settings (<dialect>/sql/catalogue.sql).
    put_event_type: Query
    lock_event_type: Query
    update_event_type: Query
    get_event_type: Query
    list_event_types: Query
    delete_event_type: Query
    catalogue_types: Query
    put_setting: Query
    get_setting: Query
    # Retention, deletes, a tenant's erasure and export (<dialect>/sql/lifecycle.sql).
    prune_succeeded: Query
    prune_failed: Query
    retention_overrides: Query
    prune_queue: Query
    prune_tenant_tasks: Query
    prune_tenant_deliveries: Query
    prune_tenant_events: Query
    prune_events: Query
    prune_retired_queues: Query
    retire_endpoint_queue: Query
    delete_pending_deliveries: Query
    delete_endpoint_row: Query
    delete_queue_if_empty: Query
    delete_task: Query
    lock_event: Query
    lock_event_deliveries: Query
    delete_event_deliveries: Query
    delete_event: Query
    tenant_known: Query
    running_erase: Query
    insert_erase_operation: Query
    erase_keys: Query
    erase_turns: Query
    erase_schedules: Query
    operations_naming_tenant: Query
    redact_operation: Query
    erase_hold_endpoints: Query
    erase_next_endpoint: Query
    erase_queue_tasks: Query
    erase_minutes: Query
    erase_events: Query
    erase_tenant_tasks: Query
    erase_notices: Query
    erase_tenant_row: Query
    advance_erase: Query
    finish_erase: Query
    export_event_tasks: Query
    export_tenant_tasks: Query
    export_test_tasks: Query
    export_attempts: Query


@dataclass(frozen=True, slots=True)
class PostgresQueries(CommonQueries):
    enqueue_tasks: Query
    enqueue_tasks_leasing: Query
    lock_for_recount: Query
    recount_lock_timeout: Query
    list_all_tasks_by_status: Query
    lock_queue_of_task: Query
    # Cross-process wake-ups, vacuum, and the locks and counters that keep queue limits
    # across processes: SQLite runs in one process, updates rows in place, and has one
    # writer, which counts.
    announce_work: Query
    take_sql_arrivals: Query
    sql_arrivals_used: Query
    set_sql_limits: Query
    schema_exists: Query
    earlier_install_elsewhere: Query
    definitions_owned_by_others: Query
    extend_lease: Query
    autovacuum_enabled: Query
    database_now: Query
    vacuum: Query
    bloated_indexes: Query
    index_leftovers: Query
    cancel_index_rebuilds: Query
    delete_queue_releases: Query
    lock_queues: Query
    recount_running: Query
    lock_queues_named: Query
    lock_erase: Query


@dataclass(frozen=True, slots=True)
class SqliteQueries(CommonQueries):
    # Parts of queries PostgreSQL runs as one statement (see sqlite/sql/core.sql).
    enqueue_tasks_ensure_queues: Query
    enqueue_tasks_insert: Query
    enqueue_tasks_leasing_room: Query
    enqueue_tasks_leasing_candidates: Query
    list_all_tasks_by_status_queues: Query
    list_all_tasks_by_status_seqs: Query
    list_all_tasks_by_status_rows: Query
    claim_tasks_open_queues: Query
    claim_tasks_plain: Query
    claim_tasks_tenants: Query
    claim_tasks_by_tenant: Query
    claim_tasks_keys: Query
    claim_tasks_key_head: Query
    claim_tasks_by_key: Query
    claim_tasks_spend_tokens: Query
    claim_tasks_served: Query
    record_results_leases: Query
    record_results_attempts: Query
    reap_expired_attempts: Query
    publish_event_deliveries: Query
    release_probe_free: Query
    release_probe_set: Query
    insert_operation_count: Query
    operation_chunk_operation: Query
    delete_task_callbacks: Query
    delete_event_deliveries_callbacks: Query
    insert_erase_operation_count: Query
    erase_keys_sessions: Query
    erase_hold_endpoints_queues: Query
    erase_queue_tasks_ids: Query
    erase_events_callbacks: Query
    erase_events_ids: Query
    erase_events_deliveries: Query
    erase_events_delete_deliveries: Query
    erase_tenant_tasks_ids: Query
    erase_notices_scanned: Query


Q = TypeVar("Q", bound=CommonQueries)
# Each dialect's queries come in files by concern: <dialect>/sql/<part>.sql.
_PARTS = ("core", "webhooks", "operations", "schedules", "stats", "access", "catalogue", "lifecycle")


def parse_blocks(text: str) -> dict[str, str]:
    blocks: dict[str, str] = {}
    matches = list(_NAME_LINE.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        name = match.group(1)
        if name in blocks:
            raise ValueError(f"query {name!r} is defined twice")
        blocks[name] = text[match.end() : end].strip()
    return blocks


def compile_query(name: str, text: str, dialect: Dialect) -> Query:
    """Expand the task shape's placeholders, then find the ``:name`` parameters; for
    PostgreSQL, number them ``$1…`` in order of first use."""
    params: list[str] = []
    text = expand_placeholders(name, text, dialect)

    def replace(match: re.Match[str]) -> str:
        lexeme = match.group(0)
        if match.group("refused"):
            raise ValueError(
                f"query {name!r}: {lexeme!r} is not supported here; write parameters by name "
                "(:name), without block comments, dollar quotes or E'' strings"
            )
        param = match.group(1)
        if param is None:
            return lexeme  # a comment or quoted text
        if param not in params:
            params.append(param)
        return f"${params.index(param) + 1}" if dialect == "postgres" else lexeme

    sql = _LEXEME.sub(replace, text)
    return Query(name, sql, tuple(params))


def expand_placeholders(name: str, text: str, dialect: Dialect) -> str:
    def replace(match: re.Match[str]) -> str:
        if not match.group(0).startswith("@"):
            return match.group(0)  # a comment or quoted text
        try:
            return task_shape.expand(match, dialect)
        except ValueError as exc:
            raise ValueError(f"query {name!r}: {exc}") from None

    return _PLACEHOLDER_LEXEME.sub(replace, text)


def _load(kind: type[Q], dialect: Dialect) -> Q:
    folder = resources.files(f"workly.storage.{dialect}").joinpath("sql")
    blocks: dict[str, str] = {}
    for part in _PARTS:
        for name, sql in parse_blocks(folder.joinpath(f"{part}.sql").read_text("utf-8")).items():
            if name in blocks:
                raise ValueError(f"query {name!r} is defined twice")
            blocks[name] = sql
    wanted = {f.name for f in fields(kind)}
    if blocks.keys() != wanted:
        missing, unknown = sorted(wanted - blocks.keys()), sorted(blocks.keys() - wanted)
        raise RuntimeError(f"{dialect}/sql: missing queries {missing}, unknown queries {unknown}")
    return kind(**{name: compile_query(name, sql, dialect) for name, sql in blocks.items()})


@cache
def postgres_queries() -> PostgresQueries:
    return _load(PostgresQueries, "postgres")


@cache
def sqlite_queries() -> SqliteQueries:
    return _load(SqliteQueries, "sqlite")
