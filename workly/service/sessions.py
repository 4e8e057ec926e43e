"""The dashboard's sessions (workly/sessions.py): opened by a login, ended by a logout, and
the principal each request with a session cookie is made by.

A session found is remembered for at most ``CACHE_SECONDS`` (as keys are, service/keys.py):
a logout in another process, or the revocation of the key a session was opened with, takes
effect here within a second; in this process at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from workly.access import BOOTSTRAP, Principal
from workly.clock import Clock
from workly.ids import new_id
from workly.service.keys import CACHE_SECONDS, MAX_CACHED, KeyUseCases
from workly.sessions import SESSION_SECONDS, Session, cookie_digest, new_cookie, token_mac
from workly.storage.contract import SessionStore

# Whether the token a session was opened with (its cookie, its token_mac) is still one of
# WORKLY_API_TOKENS.
TokenConfigured = Callable[[str, str], bool]
_PRUNE_AFTER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class _Cached:
    session: Session | None
    read_at: float


class SessionUseCases:
    def __init__(self, sessions: SessionStore, keys: KeyUseCases, clock: Clock) -> None:
        self._sessions = sessions
        self._keys = keys
        self._clock = clock
        self._cache: dict[str, _Cached] = {}

    async def open(self, principal: Principal, token_digest: bytes | None = None) -> str:
        """A new session for a principal a login found (a key's, or that of the token whose
        SHA-256 digest this is); the cookie that holds it, which is not kept anywhere."""
        assert (principal.key_id is None) == (token_digest is not None), "a key's or a token's"
        now = self._clock.now()
        cookie = new_cookie()
        digest = cookie_digest(cookie)
        assert digest is not None
        mac = None if token_digest is None else token_mac(cookie, token_digest)
        expires = now + timedelta(seconds=SESSION_SECONDS)
        session = Session(new_id("ses"), principal.key_id, mac, now, expires, None)
        await self._sessions.create_session(session, digest, now - _PRUNE_AFTER)
        return cookie

    async def close(self, cookie: str) -> bool:
        """End the session (a logout); whether there was one."""
        digest = cookie_digest(cookie)
        if digest is None:
            return False
        self._cache.pop(digest, None)
        return await self._sessions.end_session(digest, self._clock.now())

    async def principal(self, cookie: str, token_configured: TokenConfigured) -> Principal | None:
        """Who a session cookie stands for, while its session, and what opened it, hold."""
        digest = cookie_digest(cookie)
        if digest is None:
            return None
        session = await self._session(digest)
        if session is None or not session.open_at(self._clock.now()):
            return None
        if session.key_id is not None:
            return await self._keys.principal_of_key(session.key_id)
        assert session.token_mac is not None
        return BOOTSTRAP if token_configured(cookie, session.token_mac) else None

    async def _session(self, digest: str) -> Session | None:
        now = self._clock.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and now - cached.read_at < CACHE_SECONDS:
            return cached.session
        session = await self._sessions.session_by_digest(digest)
        if session is not None:  # cookies nobody was given are not remembered
            if len(self._cache) >= MAX_CACHED:
                self._cache = {d: c for d, c in self._cache.items() if now - c.read_at < CACHE_SECONDS}
            self._cache[digest] = _Cached(session, now)
        return session
