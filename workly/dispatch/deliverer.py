"""One HTTP attempt: the request exactly as enqueued, signed, through the HttpClient."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from workly import __version__
from workly.clock import Clock
from workly.dispatch.http import Blocked, ConnectError, HttpClient, HttpError, NotSent
from workly.dispatch.policy import DeliveryOutcome, parse_retry_after
from workly.models import ClaimedTask
from workly.request_rules import request_target
from workly.signing import Signer
from workly.trace_context import TraceContext, parse_trace_context
from workly.tracing import Tracing

USER_AGENT = f"Workly/{__version__}"
BLOCKED = (
    "blocked: the target resolves to an address deliveries may not reach (loopback, private, "
    "link-local, …); the server log says which. WORKLY_OUTBOUND_ALLOW opens addresses."
)
log = logging.getLogger("workly.dispatch")
# A queue's own secrets → their signer; bounded, as queues and their secrets come and go.
_MAX_QUEUE_SIGNERS = 1024


class Deliverer:
    def __init__(
        self,
        client: HttpClient,
        signer: Signer,
        clock: Clock,
        capture_limit: int = 0,
        tracing: Tracing | None = None,
        open_secret: Callable[[str], str | None] | None = None,
    ) -> None:
        """``capture_limit``: response bytes kept for a task with a callback (which hands its
        receiver's answer on); other tasks keep what the client keeps (a snippet).
        ``open_secret``: a queue's signing secret as stored → as given (secret_box.py)."""
        self._client = client
        self._tracing = tracing or Tracing()
        self._capture_limit = capture_limit
        self._signer = signer
        self._clock = clock
        self._open_secret = open_secret
        self._queue_signers: dict[str, Signer] = {}

    def _signer_for(self, task: ClaimedTask) -> Signer:
        if task.signing_secret is None:
            return self._signer
        signer = self._queue_signers.get(task.signing_secret)
        if signer is None:
            if len(self._queue_signers) >= _MAX_QUEUE_SIGNERS:
                self._queue_signers.clear()
            secret = (
                task.signing_secret if self._open_secret is None else self._open_secret(task.signing_secret)
            )
            signer = self._queue_signers[task.signing_secret] = Signer((secret or "").split())
        return signer

    async def deliver(self, task: ClaimedTask, may_send: Callable[[], bool] | None = None) -> DeliveryOutcome:
        """One attempt. ``may_send``: asked right before the request is written; when it says
        no, NotSent is raised and nothing was sent (the dispatcher's lease deadline)."""
        context = parse_trace_context(task.traceparent, task.tracestate) if task.traceparent else None
        if context is None and not self._tracing.enabled:
            return await self._attempt(task, None, may_send)
        with self._tracing.attempt(task.method, context, self._span_attributes(task)) as span:
            try:
                outcome = await self._attempt(task, span.context, may_send)
            except NotSent:
                span.failed = "not sent: its lease may have ended"
                raise
            if outcome.status_code is not None:
                span.attributes["http.response.status_code"] = outcome.status_code
            if outcome.error is not None or not 200 <= (outcome.status_code or 0) < 300:
                span.failed = outcome.error or f"HTTP {outcome.status_code}"
            return outcome

    def _span_attributes(self, task: ClaimedTask) -> dict[str, Any]:
        if not self._tracing.enabled:
            return {}
        shown: dict[str, Any] = {
            "http.request.method": task.method, "workly.task.id": task.id, "workly.queue": task.queue,
            "workly.attempt": task.attempt,
        }  # fmt: skip
        # Never the whole URL: a webhook URL often carries a secret in its path or query. The
        # raw (ASCII) host: decoding an IDNA label may fail, and a span must never stop an attempt.
        try:
            target = request_target(task.url)
        except ValueError:
            return shown
        where = {"url.scheme": target.scheme, "server.address": target.raw_host, "server.port": target.port}
        return {**shown, **{name: value for name, value in where.items() if value is not None}}

    async def _attempt(
        self, task: ClaimedTask, trace: TraceContext | None, may_send: Callable[[], bool] | None
    ) -> DeliveryOutcome:
        started = self._clock.now()
        try:
            # In the try: a signing secret that cannot be opened (WORKLY_SECRET_KEY lacks its key)
            # is a failed attempt, retried later, never a lost task.
            headers = self._headers(task, int(started.timestamp()), trace)
            max_body = self._capture_limit if task.capture_response else None
            response = await self._client.request(
                task.method, task.url, headers, task.body, max_body, timeout=task.timeout, may_send=may_send
            )
            finished = self._clock.now()
            retry_after = parse_retry_after(response.headers.get("retry-after"), finished)
        except TimeoutError:
            error = f"timeout: no response within {task.timeout:g}s"
            return DeliveryOutcome(started, self._clock.now(), error=error, timed_out=True)
        except Blocked as exc:  # nothing was sent; a retry would meet the same policy
            # The details (which name resolved to which internal address) stay in the server
            # log: the attempt is readable through the API, and must not map the network.
            log.warning("delivery of task %s blocked: %s", task.id, exc)
            return DeliveryOutcome(started, self._clock.now(), error=BLOCKED, permanent=True)
        except NotSent:
            raise  # no attempt was made: the dispatcher leaves the task to its lease
        except ConnectError as exc:
            error = f"connection failed: {exc}"
        except HttpError as exc:
            error = f"protocol error: {exc}"
        except Exception as exc:  # e.g. a URL that cannot be encoded: a failed attempt, never a lost task
            error = f"request failed: {type(exc).__name__}: {exc}"
        else:
            return DeliveryOutcome(
                started_at=started,
                finished_at=finished,
                status_code=response.status,
                response=response.body,
                retry_after=retry_after,
            )
        return DeliveryOutcome(started_at=started, finished_at=self._clock.now(), error=error)

    def _headers(self, task: ClaimedTask, timestamp: int, trace: TraceContext | None) -> dict[str, str]:
        """The task's headers, a default user-agent unless it has one, and the signature
        headers (and this attempt's trace context), which replace any of the same name
        whatever its case."""
        # An event's deliveries share its id: receivers deduplicate on it across endpoints
        # and attempts.
        message_id = task.event_id or task.id
        signature = self._signer_for(task).headers(message_id, timestamp, task.body)
        if trace is not None:
            signature.update(trace.headers())
        headers = {name: value for name, value in task.headers.items() if name.lower() not in signature}
        if not any(name.lower() == "user-agent" for name in headers):
            headers["user-agent"] = USER_AGENT
        headers.update(signature)
        return headers
