"""The audit trail: one audit log entry (workly/audit.py) per state-changing request and per
request refused with 401 or 403, written before the answer leaves, so that a client that
got its answer finds the entry.

It wraps the guards: it sees their 401s, and the principal they found. It also keeps the
count of failed authentications (auth_failures.py): a 401 to a request that offered a
credential (a bearer, or the login form) counts, and an address past the limit is answered
429 before anything else. A refusal of a request that offered none counts for nothing (any
web page can make a browser send those: they must not lock its user out), but at most
``ANONYMOUS_RECORDED`` of them per minute and address are recorded, so that they cannot
flood the log. What the request did
(its action, target, tenant and redacted changes) is what the service's access layer noted
in the request's ``AuditNote`` (workly/service/access); a request that never reached a use
case (refused by a guard, or invalid) is recorded as its method and path.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import datetime

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from workly.audit import AuditEntry, Outcome
from workly.ids import new_id
from workly.web.auth_failures import AuthFailures, too_many_failures
from workly.web.principals import audit_note_of, bearer_of, principal_of

Record = Callable[[AuditEntry], Awaitable[None]]
_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Recorded as the tasks and events they store, unless refused (DESIGN.md).
_NOT_AUDITED = frozenset({"task.enqueue", "event.publish"})
_AUDITED_PATHS = ("/v1/", "/ui/")
ANONYMOUS_RECORDED = 20  # refusals of requests without a credential, per minute and address
# … and the same requests when they fail before reaching the service (an invalid body).
_ENQUEUE_OR_PUBLISH = re.compile(r"/v1/queues/[^/]+/tasks(/batch)?|/v1/events")
_SESSION_ACTIONS = {"/ui/login": "session.login", "/ui/logout": "session.logout"}
_MAX_TEXT = 256  # characters of an action, a target or a user agent kept
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class AuditTrail:
    def __init__(
        self, app: ASGIApp, record: Record, now: Callable[[], datetime], failures: AuthFailures
    ) -> None:
        self._app = app
        self._record = record
        self._now = now
        self._failures = failures
        # Refusals without a credential recorded per address (its "blocked" time: recorded no more).
        self._anonymous = AuthFailures(limit=ANONYMOUS_RECORDED)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        address = _client_address(scope)
        wait = self._failures.blocked_for(address)
        if wait:
            await too_many_failures(wait)(scope, receive, send)
            return
        note = audit_note_of(scope)  # made before the app runs, so the service fills this one

        async def send_after_recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                offered = _offered_credential(scope)
                if status == 401 and offered:
                    self._failures.failed(address)
                if _audited(scope, note.action, status) and self._may_record(scope, status, offered, address):
                    await self._record(self._entry(scope, status))
            await send(message)

        await self._app(scope, receive, send_after_recording)

    def _may_record(self, scope: Scope, status: int, offered: bool, address: str) -> bool:
        if status not in (401, 403) or offered or principal_of(scope).type != "anonymous":
            return True
        if self._anonymous.blocked_for(address):
            return False
        self._anonymous.failed(address)
        return True

    def _entry(self, scope: Scope, status: int) -> AuditEntry:
        note = audit_note_of(scope)
        principal = principal_of(scope)
        path = scope["path"]
        client = scope.get("client")
        user_agent = next((v for k, v in scope["headers"] if k == b"user-agent"), None)
        return AuditEntry(
            id=new_id("aud"),
            at=self._now(),
            actor=principal.actor(),
            action=_printable(note.action or _SESSION_ACTIONS.get(path) or f"{scope['method']} {path}"),
            target=None if note.target is None else _printable(note.target),
            tenant=note.tenant,
            outcome=_outcome(status),
            status=status,
            source_ip=str(client[0]) if client else None,
            user_agent=None if user_agent is None else _printable(user_agent.decode("latin-1")),
            changes=note.changes if status < 400 else {},
        )


def _offered_credential(scope: Scope) -> bool:
    """A bearer, or the login form (whose body holds a token or key)."""
    if scope["path"] == "/ui/login" and scope["method"] == "POST":
        return True
    return bearer_of(scope["headers"]) is not None


def _client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def _printable(text: str) -> str:
    """Text a client chose, as kept: control characters escaped (no database refuses it, no log
    line is split by it), at most ``_MAX_TEXT`` characters."""
    escaped = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return escaped if len(escaped) <= _MAX_TEXT else escaped[: _MAX_TEXT - 1] + "…"


def _audited(scope: Scope, action: str | None, status: int) -> bool:
    if status in (401, 403):
        return True
    path = scope["path"]
    if scope["method"] not in _CHANGING or not path.startswith(_AUDITED_PATHS):
        return False
    return action not in _NOT_AUDITED and not (action is None and _ENQUEUE_OR_PUBLISH.fullmatch(path))


def _outcome(status: int) -> Outcome:
    if status in (401, 403):
        return "denied"
    return "ok" if status < 400 else "error"
