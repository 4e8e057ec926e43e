"""API keys' use cases (docs/security.md): create (the key shown once), read, list, revoke,
and the lookup every request with a ``wk_`` bearer goes through.

A found key is remembered for at most ``CACHE_SECONDS``: a revocation in another process
takes effect here within that time (DESIGN: everywhere within 1 s), at the cost of one
read per key and half second. A revocation in this process takes effect at once.
``last_used_at`` is written at most once a minute per key and process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from workly.access import Principal
from workly.api_keys import ApiKey, ApiKeySpec, key_digest, new_key
from workly.clock import Clock
from workly.errors import ApiKeyNotFound
from workly.ids import new_id
from workly.storage.contract import KeyStore

log = logging.getLogger("workly.keys")
CACHE_SECONDS = 0.5
TOUCH_SECONDS = 60.0
MAX_CACHED = 10_000


@dataclass(frozen=True, slots=True)
class _Cached:
    key: ApiKey
    read_at: float  # the clock's monotonic seconds


class KeyUseCases:
    def __init__(self, keys: KeyStore, clock: Clock) -> None:
        self._keys = keys
        self._clock = clock
        self._cache: dict[str, _Cached] = {}  # by digest
        self._by_id: dict[str, _Cached] = {}  # the keys sessions were opened with
        self._touched: dict[str, float] = {}  # key id → when this process last wrote last_used_at

    async def create_key(self, spec: ApiKeySpec) -> tuple[ApiKey, str]:
        """The stored key and the key itself, which is not kept anywhere."""
        secret = new_key()
        return await self._keys.create_key(new_id("key"), spec, key_digest(secret), self._clock.now()), secret

    async def get_key(self, key_id: str) -> ApiKey:
        found = await self._keys.get_key(key_id)
        if found is None:
            raise ApiKeyNotFound(key_id)
        return found

    async def list_keys(self, limit: int, before_seq: int | None) -> tuple[list[ApiKey], int | None]:
        return await self._keys.list_keys(limit, before_seq)

    async def revoke_key(self, key_id: str) -> ApiKey:
        revoked = await self._keys.revoke_key(key_id, self._clock.now())
        for digest in [d for d, cached in self._cache.items() if cached.key.id == key_id]:
            del self._cache[digest]
        self._by_id.pop(key_id, None)
        return revoked

    async def principal_of_key(self, key_id: str) -> Principal | None:
        """The principal of a usable key found by its id (a dashboard session's), else None."""
        now = self._clock.monotonic()
        cached = self._by_id.get(key_id)
        if cached is not None and now - cached.read_at < CACHE_SECONDS:
            key: ApiKey | None = cached.key
        else:
            key = await self._keys.get_key(key_id)
            if key is not None:
                if len(self._by_id) >= MAX_CACHED:
                    self._by_id = {k: c for k, c in self._by_id.items() if now - c.read_at < CACHE_SECONDS}
                self._by_id[key_id] = _Cached(key, now)
        if key is None or not key.usable_at(self._clock.now()):
            return None
        return key.principal()

    async def authenticate(self, offered: bytes) -> Principal | None:
        """The principal of a usable (not revoked, not expired) key, else None."""
        digest = key_digest(offered)
        now = self._clock.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and now - cached.read_at < CACHE_SECONDS:
            key: ApiKey | None = cached.key
        else:
            key = await self._keys.key_by_digest(digest)
            self._remember(digest, key, now)
        if key is None or not key.usable_at(self._clock.now()):
            return None
        await self._touch(key, now)
        return key.principal()

    def _remember(self, digest: str, key: ApiKey | None, now: float) -> None:
        if key is None:  # unknown keys are not remembered: nobody could fill the cache with them
            self._cache.pop(digest, None)
            return
        if len(self._cache) >= MAX_CACHED:
            self._cache = {d: c for d, c in self._cache.items() if now - c.read_at < CACHE_SECONDS}
        self._cache[digest] = _Cached(key, now)

    async def _touch(self, key: ApiKey, now: float) -> None:
        last = self._touched.get(key.id)
        if last is not None and now - last < TOUCH_SECONDS:
            return
        self._touched[key.id] = now
        try:
            await self._keys.touch_key(key.id, self._clock.now())
        except Exception as exc:  # a request is not refused because its key's last use went unrecorded
            log.warning("recording the use of API key %s failed: %s", key.id, exc)
