"""Names Workly keeps for itself, refused when a client gives them (the API here, SQL's
enqueue_task and publish_event in migrations/postgres/repeatable/enqueue_checks.sql).

A queue ``workly.*`` is Workly's own: its callbacks go to ``workly.callbacks``, signed by
Workly, with the idempotency key ``<task id>:<n>``; a client's task there could pass for a
callback, or take a key a callback needs and have it deduplicated away. An idempotency key
``schedule:…`` is a schedule's firing's (schedules.firing_key): a client's task or event
holding it would replace that firing. A ``workly.*`` queue may still be configured (PUT,
PATCH): its rate limit and concurrency are the operator's.
"""

from __future__ import annotations

from workly.errors import ReservedName

QUEUE_PREFIX = "workly."
IDEMPOTENCY_KEY_PREFIX = "schedule:"


def check_client_queue(queue: str) -> None:
    """Refuse a client's task for one of Workly's own queues."""
    if queue.startswith(QUEUE_PREFIX):
        raise ReservedName(
            f"queue names starting with {QUEUE_PREFIX!r} are Workly's own ({queue!r} takes no task a "
            "client sends): pick another name"
        )


def check_client_idempotency_key(key: str | None) -> None:
    """Refuse an idempotency key of the kind Workly gives its schedules' firings."""
    if key is not None and key.startswith(IDEMPOTENCY_KEY_PREFIX):
        raise ReservedName(
            f"idempotency keys starting with {IDEMPOTENCY_KEY_PREFIX!r} are Workly's own (its schedules' "
            "firings carry them): pick another key"
        )
