"""What replicas share in Redis besides history: server-side sessions and the turn locks' leases.

- :class:`RedisSessionStore`: one hash per user (``{prefix}session:{user_id}``: ``id``, ``started_at``,
  ``last_seen``) whose TTL is the session's inactivity TTL, re-armed by every touch. Redis expires the key, so every
  replica sees the same session and the same expiry, and an idle session needs no sweeping.
- :class:`RedisLockBackend`: ``{prefix}lock:{hash of user and conversation}`` set with ``SET NX PX`` to a random
  token; renewed and released by Lua scripts that act only while the key still holds that token, so a holder whose
  lease ran out can never extend or free a lock someone else holds now. Used through
  :class:`anaphora.store.locks.SharedTurnLock`.

Needs the ``redis`` extra: ``pip install 'anaphora[redis]'``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from anaphora.errors import ConfigurationError
from anaphora.store.locks import lock_digest
from anaphora.store.protocols import LockKey, Session
from anaphora.store.redis_store import DEFAULT_PREFIX, async_client, translating

# KEYS[1]: the session hash. ARGV: TTL in ms, now, a fresh id. Returns {id, started_at, last_seen}.
_TOUCH = """
if redis.call('HEXISTS', KEYS[1], 'id') == 1 then
  redis.call('HSET', KEYS[1], 'last_seen', ARGV[2])
else
  redis.call('HSET', KEYS[1], 'id', ARGV[3], 'started_at', ARGV[2], 'last_seen', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return redis.call('HMGET', KEYS[1], 'id', 'started_at', 'last_seen')
"""

# KEYS[1]: the session hash. Returns {id, started_at, last_seen} of the session it deleted, or an empty list.
_LOGOUT = """
local found = redis.call('HMGET', KEYS[1], 'id', 'started_at', 'last_seen')
if not found[1] then
  return {}
end
redis.call('DEL', KEYS[1])
return found
"""

# KEYS[1]: the lock. ARGV: token, lease in ms. Returns 1 if the token still held it.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS[1]: the lock. ARGV: token. Deletes it only while the token holds it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def _session(user_id: str, reply: list[str]) -> Session:
    session_id, started_at, last_seen = reply
    return Session(session_id, user_id, float(started_at), float(last_seen))


class RedisSessionStore:
    """Sessions shared by every replica, each expiring after ``ttl_s`` without a request (Redis does the expiring).

    Unlike the in-memory store there is no ceiling on live sessions: an idle one costs nothing once its TTL ends.
    """

    def __init__(
        self,
        url: str,
        *,
        ttl_s: float,
        key_prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 10.0,
        client: Any = None,
    ) -> None:
        if ttl_s * 1000 < 1:
            raise ConfigurationError("session_ttl_s must be at least a millisecond", hint="set ANAPHORA_SESSION_TTL_S")
        self.ttl_s = ttl_s
        self.prefix = key_prefix
        self.client = client or async_client(url, timeout_s, purpose="Redis sessions")
        self._touch = self.client.register_script(_TOUCH)
        self._logout = self.client.register_script(_LOGOUT)

    def key(self, user_id: str) -> str:
        return f"{self.prefix}session:{user_id}"

    @translating
    async def touch(self, user_id: str) -> Session:
        ttl_ms = max(1, round(self.ttl_s * 1000))
        reply = await self._touch(keys=[self.key(user_id)], args=[ttl_ms, repr(time.time()), uuid.uuid4().hex[:16]])
        return _session(user_id, reply)

    @translating
    async def logout(self, user_id: str) -> Session | None:
        reply = await self._logout(keys=[self.key(user_id)], args=[])
        return _session(user_id, reply) if reply else None

    @translating
    async def ping(self) -> None:
        await self.client.ping()

    async def aclose(self) -> None:
        await self.client.aclose()


class RedisLockBackend:
    """Turn-lock leases of ``lease_s`` seconds in Redis (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        lease_s: float,
        key_prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 10.0,
        client: Any = None,
    ) -> None:
        self.lease_ms = max(1, round(lease_s * 1000))
        self.prefix = key_prefix
        self.client = client or async_client(url, timeout_s, purpose="Redis turn locks")
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    def key(self, key: LockKey) -> str:
        return f"{self.prefix}lock:{lock_digest(key).hex()}"

    @translating
    async def try_acquire(self, key: LockKey) -> object | None:
        token = uuid.uuid4().hex
        return token if await self.client.set(self.key(key), token, nx=True, px=self.lease_ms) else None

    @translating
    async def renew(self, key: LockKey, token: object) -> bool:
        return bool(await self._renew(keys=[self.key(key)], args=[token, self.lease_ms]))

    @translating
    async def release(self, key: LockKey, token: object) -> None:
        await self._release(keys=[self.key(key)], args=[token])

    async def aclose(self) -> None:
        await self.client.aclose()
