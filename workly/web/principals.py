"""Who a request comes from, as the guards found out (workly/access.py's ``Principal``).

The guard in front (guards.py ``BearerTokens``, or ``OpenAccess`` when `workly dev` runs
without tokens) puts the request's principal, and an empty ``AuditNote`` the service fills
in, into the ASGI scope's ``state``; the routes' service dependency
(dependencies.py) and the audit trail (audit_trail.py) read them from there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from workly.access import ANONYMOUS, BOOTSTRAP, Principal
from workly.api_keys import looks_like_key
from workly.errors import StorageUnavailable
from workly.service.access import AuditNote
from workly.web.problems import problem

# A ``wk_`` key's principal, or None (unknown, revoked, expired).
KeyLookup = Callable[[bytes], Awaitable[Principal | None]]
# A dashboard session cookie's principal, or None (unknown, ended, expired).
SessionLookup = Callable[[str], Awaitable[Principal | None]]
_PRINCIPAL = "principal"
_NOTE = "audit_note"


def state_of(scope: Scope) -> dict[str, Any]:
    state: dict[str, Any] = scope.setdefault("state", {})
    return state


def set_principal(scope: Scope, principal: Principal) -> None:
    state_of(scope)[_PRINCIPAL] = principal


def principal_of(scope: Scope) -> Principal:
    """The request's principal; a request no guard let through as anyone is nobody."""
    found = state_of(scope).get(_PRINCIPAL)
    return found if isinstance(found, Principal) else ANONYMOUS


def audit_note_of(scope: Scope) -> AuditNote:
    state = state_of(scope)
    note = state.get(_NOTE)
    if not isinstance(note, AuditNote):
        note = state[_NOTE] = AuditNote()
    return note


def bearer_of(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The credential of ``Authorization: Bearer <credential>``, if the request has one."""
    header = next((value for name, value in headers if name == b"authorization"), None)
    if header is None or header[:7].lower() != b"bearer ":
        return None
    return header[7:].strip()


async def key_principal(lookup: KeyLookup, offered: bytes) -> Principal | None:
    """The principal of a ``wk_`` key; raises StorageUnavailable when it cannot be looked up
    (the service is not running, or the database does not answer)."""
    if not looks_like_key(offered):
        return None
    try:
        return await lookup(offered)
    except StorageUnavailable:
        raise
    except Exception as exc:  # ServiceNotRunning is a StorageUnavailable; anything else too
        raise StorageUnavailable(str(exc)) from exc


async def session_principal(lookup: SessionLookup, cookie: str) -> Principal | None:
    """The principal of a dashboard session; raises StorageUnavailable when it cannot be
    looked up."""
    try:
        return await lookup(cookie)
    except StorageUnavailable:
        raise
    except Exception as exc:
        raise StorageUnavailable(str(exc)) from exc


async def unavailable(scope: Scope, receive: Receive, send: Send) -> None:
    detail = "API keys cannot be checked now (the database does not answer); retry later."
    await problem(503, detail, "unavailable")(scope, receive, send)


class OpenAccess:
    """`workly dev` without tokens: every caller is an admin, but one that sends a ``wk_``
    key is that key (its role and tenant), and a key that is not valid is refused (401)."""

    def __init__(self, app: ASGIApp, keys: KeyLookup) -> None:
        self._app = app
        self._keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        principal = BOOTSTRAP
        offered = bearer_of(scope["headers"])
        if offered is not None and looks_like_key(offered):
            try:
                found = await key_principal(self._keys, offered)
            except StorageUnavailable:
                await unavailable(scope, receive, send)
                return
            if found is None:
                detail = "This API key is not valid (unknown, revoked or expired)."
                await problem(401, detail, "unauthorized")(scope, receive, send)
                return
            principal = found
        set_principal(scope, principal)
        await self._app(scope, receive, send)
