"""Redis-backed conversations, turns and summaries, and a Redis embedding cache (redis-py).

Same rules as :class:`~anaphora.store.SQLiteConversationStore` (the contract suite in
:mod:`anaphora.testing.store_contract` runs against both). Every key carries a TTL (``ttl_s``, default 7 days),
refreshed on activity: creating a conversation, appending a turn or saving a summary re-arms the TTL of all that
conversation's keys and of the indexes that list it. Keys, under ``key_prefix`` (default ``anaphora:``):

- ``conv:{id}``: hash with ``user_id``, ``title``, ``created_at``, ``updated_at``;
- ``turns:{id}``: list of JSON turns; a turn's index is its position, so indexes are gapless by construction (a
  turn written before ``shown_passages`` and ``window_start`` were stored gets them from its trace when read:
  :mod:`anaphora.store.turn_fields`);
- ``sums:{id}``: hash ``covers_turns`` -> JSON ``{text, created_at}``, every version kept;
- ``fb:{id}``: the votes on the conversation's answers, hash ``{index}:{user_id}`` -> JSON ``{vote, comment,
  updated_at}`` and ``{index}:{user_id}:created`` -> when the vote was first cast;
- ``user:{user_id}``: sorted set of the user's conversation ids by ``updated_at`` (listing, erasure);
- ``updated``: sorted set of every conversation id by ``updated_at`` (the history TTL sweep).

Every write is one Lua script, so it is atomic and serialised against writes from any other client (appends from
several replicas get distinct, gapless indexes). The scripts build key names from the prefix, so this needs a
single Redis server (or a primary with replicas), not Redis Cluster.

Needs the ``redis`` extra: ``pip install 'anaphora[redis]'``.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from anaphora.errors import (
    ConversationExistsError,
    ConversationNotFoundError,
    NotFoundError,
    StoreError,
    TurnNotFoundError,
    require,
)
from anaphora.store.protocols import (
    AppendThroughExtend,
    ChainStart,
    Conversation,
    Feedback,
    LoggedTurn,
    NewTurn,
    StoredTurn,
    Summary,
    Vote,
    new_conversation_id,
)
from anaphora.store.turn_fields import fields_from_trace
from anaphora.types import Citation, Passage, TurnTrace

DEFAULT_TTL_S = 7 * 86400
DEFAULT_PREFIX = "anaphora:"

# Lua helpers shared by the scripts. ARGV[1] is always the key prefix, ARGV[2] the TTL in seconds.
_LUA_COMMON = """
local prefix = ARGV[1]
local ttl = tonumber(ARGV[2])
local function refresh(id, user)
  for _, name in ipairs({'conv:', 'turns:', 'sums:', 'fb:'}) do
    redis.call('EXPIRE', prefix .. name .. id, ttl)
  end
  redis.call('EXPIRE', prefix .. 'user:' .. user, ttl)
  redis.call('EXPIRE', prefix .. 'updated', ttl)
end
local function remove(id)
  local conv = prefix .. 'conv:' .. id
  local user = redis.call('HGET', conv, 'user_id')
  redis.call('ZREM', prefix .. 'updated', id)
  if not user then
    return nil
  end
  local turns = redis.call('LLEN', prefix .. 'turns:' .. id)
  local sums = redis.call('HLEN', prefix .. 'sums:' .. id)
  redis.call('DEL', conv, prefix .. 'turns:' .. id, prefix .. 'sums:' .. id, prefix .. 'fb:' .. id)
  redis.call('ZREM', prefix .. 'user:' .. user, id)
  return {turns, sums}
end
"""

# ARGV: prefix, ttl, id, user_id, title, now
_CREATE = (
    _LUA_COMMON
    + """
local id, user, now = ARGV[3], ARGV[4], ARGV[6]
redis.call('HSET', prefix .. 'conv:' .. id, 'user_id', user, 'title', ARGV[5], 'created_at', now, 'updated_at', now)
redis.call('ZADD', prefix .. 'user:' .. user, now, id)
redis.call('ZADD', prefix .. 'updated', now, id)
refresh(id, user)
return 1
"""
)

# ARGV: prefix, ttl, id, user_id, now, start ('1': the write creates the conversation), its title, parent id or '',
# turns to copy from the parent, the title if the conversation has none, then the turns' JSON. Returns the first new
# turn's index, -1 (not found) or -2 (the id is taken). A branch is copied in the server (COPY, then LTRIM to the
# branch point; COPY needs Redis 6.2).
_EXTEND = (
    _LUA_COMMON
    + """
local id, user, now = ARGV[3], ARGV[4], ARGV[5]
local conv = prefix .. 'conv:' .. id
local turns = prefix .. 'turns:' .. id
if ARGV[6] == '1' then
  local title, parent, upto = ARGV[7], ARGV[8], tonumber(ARGV[9])
  if parent ~= '' then
    local from = prefix .. 'conv:' .. parent
    if redis.call('HGET', from, 'user_id') ~= user or redis.call('LLEN', prefix .. 'turns:' .. parent) < upto then
      return -1
    end
    if title == '' then
      title = redis.call('HGET', from, 'title')
    end
  end
  if redis.call('EXISTS', conv) == 1 or redis.call('EXISTS', turns) == 1 then
    return -2
  end
  if parent ~= '' and upto > 0 then
    redis.call('COPY', prefix .. 'turns:' .. parent, turns)
    redis.call('LTRIM', turns, 0, upto - 1)
  end
  redis.call('HSET', conv, 'user_id', user, 'title', title, 'created_at', now, 'updated_at', now)
elseif redis.call('HGET', conv, 'user_id') ~= user then
  return -1
end
local first = redis.call('LLEN', turns)
for i = 11, #ARGV do
  redis.call('RPUSH', turns, ARGV[i])
end
if redis.call('HGET', conv, 'title') == '' then
  redis.call('HSET', conv, 'title', ARGV[10])
end
redis.call('HSET', conv, 'updated_at', now)
redis.call('ZADD', prefix .. 'user:' .. user, now, id)
redis.call('ZADD', prefix .. 'updated', now, id)
refresh(id, user)
return first
"""
)

# ARGV: prefix, ttl, id, user_id, covers_turns, summary JSON. Returns 1, or -1 when not found.
_SAVE_SUMMARY = (
    _LUA_COMMON
    + """
local id, user = ARGV[3], ARGV[4]
if redis.call('HGET', prefix .. 'conv:' .. id, 'user_id') ~= user then
  return -1
end
redis.call('HSET', prefix .. 'sums:' .. id, ARGV[5], ARGV[6])
refresh(id, user)
return 1
"""
)

# ARGV: prefix, ttl, id, user_id. Returns 1, or -1 when not found.
_DELETE = (
    _LUA_COMMON
    + """
local id, user = ARGV[3], ARGV[4]
if redis.call('HGET', prefix .. 'conv:' .. id, 'user_id') ~= user then
  return -1
end
remove(id)
return 1
"""
)

# ARGV: prefix, ttl, id, user_id, title. Returns 1, or -1 when not found.
_RENAME = (
    _LUA_COMMON
    + """
local conv = prefix .. 'conv:' .. ARGV[3]
if redis.call('HGET', conv, 'user_id') ~= ARGV[4] then
  return -1
end
redis.call('HSET', conv, 'title', ARGV[5])
return 1
"""
)

# ARGV: prefix, ttl, id, user_id, turn index, vote JSON (or '' to withdraw it), now. Returns when the vote was first
# cast (withdrawn: '1' if there was one, else '0'), or -1 when the user has no such turn.
_RATE = (
    _LUA_COMMON
    + """
local id, user, index = ARGV[3], ARGV[4], tonumber(ARGV[5])
local owner = redis.call('HGET', prefix .. 'conv:' .. id, 'user_id')
if owner ~= user or index >= redis.call('LLEN', prefix .. 'turns:' .. id) then
  return -1
end
local key, field = prefix .. 'fb:' .. id, ARGV[5] .. ':' .. user
if ARGV[6] == '' then
  return tostring(redis.call('HDEL', key, field, field .. ':created'))
end
redis.call('HSET', key, field, ARGV[6])
redis.call('HSETNX', key, field .. ':created', ARGV[7])
local left = redis.call('TTL', prefix .. 'conv:' .. id)  -- a vote is no activity: it expires with its turn
redis.call('EXPIRE', key, left > 0 and left or ttl)
return redis.call('HGET', key, field .. ':created')
"""
)

# ARGV: prefix, ttl, mode ('user' or 'inactive'), user_id or exclusive score bound, ids to keep...
# Returns {conversations, turns, summaries}.
_DELETE_MANY = (
    _LUA_COMMON
    + """
local ids
if ARGV[3] == 'user' then
  ids = redis.call('ZRANGE', prefix .. 'user:' .. ARGV[4], 0, -1)
else
  ids = redis.call('ZRANGEBYSCORE', prefix .. 'updated', '-inf', '(' .. ARGV[4])
end
local keep = {}
for i = 5, #ARGV do
  keep[ARGV[i]] = true
end
local counts = {0, 0, 0}
for _, id in ipairs(ids) do
  if not keep[id] then
    local removed = remove(id)
    if ARGV[3] == 'user' then
      redis.call('ZREM', prefix .. 'user:' .. ARGV[4], id)
    end
    if removed then
      counts[1] = counts[1] + 1
      counts[2] = counts[2] + removed[1]
      counts[3] = counts[3] + removed[2]
    end
  end
end
return counts
"""
)


def _not_found(conversation_id: str) -> NotFoundError:
    return ConversationNotFoundError(conversation_id)


def _unavailable(exc: Exception) -> StoreError:
    return StoreError(
        f"cannot reach the Redis store: {exc}",
        hint="check ANAPHORA_REDIS_URL and that the Redis server is running and reachable",
    )


HEALTH_CHECK_IDLE_S = 2  # a pooled connection idle for longer is PINGed before it is used again


def connection_options(timeout_s: float, *, asyncio: bool) -> dict[str, Any]:
    """Options of every Redis client here: pooled connections are checked before reuse, so the first command
    after a Redis restart does not fail on a connection the server closed (it used to give one 503).

    redis-py's pool passes no retry to its connections, so neither the health check's PING nor a command
    reconnects by default. One retry on a closed connection (not on a timeout, after which the command may have
    run) lets the PING reconnect; a command whose connection breaks under it is retried once too, which after a
    restart is safe (the server that closed it never ran it)."""
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.retry import Retry

    retry = (AsyncRetry if asyncio else Retry)(
        ExponentialBackoff(cap=0.5, base=0.05), 1, supported_errors=(RedisConnectionError,)
    )
    return {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "health_check_interval": HEALTH_CHECK_IDLE_S,
        "retry": retry,
    }


def async_client(url: str, timeout_s: float, *, purpose: str) -> Any:
    """An asyncio Redis client that decodes replies to text; connects on first use."""
    redis_asyncio = require("redis.asyncio", package="redis", extra="redis", purpose=purpose)
    return redis_asyncio.Redis.from_url(url, decode_responses=True, **connection_options(timeout_s, asyncio=True))


def translating(method):
    """Report connection failures as :class:`StoreError`; everything else passes through."""

    @functools.wraps(method)
    async def wrapper(*args, **kwargs):
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        try:
            return await method(*args, **kwargs)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise _unavailable(exc) from exc

    return wrapper


def _feedback(votes: dict[str, str], index: int, user_id: str) -> Feedback | None:
    """The vote of ``user_id`` on turn ``index`` among a conversation's ``fb:`` hash."""
    field = f"{index}:{user_id}"
    if field not in votes:
        return None
    data = json.loads(votes[field])
    created = float(votes.get(f"{field}:created", data["updated_at"]))
    return Feedback(
        user_id=user_id, vote=data["vote"], comment=data["comment"], created_at=created, updated_at=data["updated_at"]
    )


def _payload(turn: NewTurn, now: float) -> str:
    """A turn as the JSON a list entry holds (NaN and infinities as null, as SQLite stores them)."""
    return json.dumps(
        {
            "question": turn.question,
            "answer": turn.answer,
            "citations": [json.loads(c.model_dump_json()) for c in turn.citations],
            "trace": json.loads(turn.trace.model_dump_json()) if turn.trace is not None else None,
            "shown_passages": [json.loads(p.model_dump_json()) for p in turn.shown_passages],
            "window_start": turn.window_start,
            "created_at": now,
        }
    )


def _turn(index: int, raw: str, feedback: Feedback | None = None) -> StoredTurn:
    data = json.loads(raw)
    if "shown_passages" in data:
        shown, start = data["shown_passages"], data["window_start"]
    else:  # written before the fields were explicit (Redis keeps no schema version): from its trace
        shown, start = fields_from_trace(data["trace"], index)
    return StoredTurn(
        index=index,
        question=data["question"],
        answer=data["answer"],
        citations=[Citation.model_validate(c) for c in data["citations"]],
        trace=TurnTrace.model_validate(data["trace"]) if data["trace"] is not None else None,
        shown_passages=[Passage.model_validate(p) for p in shown],
        window_start=start,
        created_at=data["created_at"],
        feedback=feedback,
    )


class RedisConversationStore(AppendThroughExtend):
    """Conversations in Redis, a TTL on every key. Construction is cheap and connects lazily; close with
    :meth:`aclose`."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        ttl_s: int = DEFAULT_TTL_S,
        key_prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 10.0,
        client: Any = None,
    ) -> None:
        if ttl_s < 1:
            raise StoreError("the Redis store needs a TTL of at least one second", hint="set ANAPHORA_REDIS_TTL_S")
        self.ttl_s = int(ttl_s)
        self.prefix = key_prefix
        self.client = client or async_client(url, timeout_s, purpose="the Redis conversation store")
        self._scripts = {
            name: self.client.register_script(source)
            for name, source in (
                ("create", _CREATE),
                ("extend", _EXTEND),
                ("save_summary", _SAVE_SUMMARY),
                ("delete", _DELETE),
                ("rename", _RENAME),
                ("delete_many", _DELETE_MANY),
                ("rate", _RATE),
            )
        }

    def key(self, kind: str, name: str = "") -> str:
        return f"{self.prefix}{kind}:{name}" if name else f"{self.prefix}{kind}"

    async def _run(self, script: str, *args: Any) -> Any:
        return await self._scripts[script](keys=[], args=[self.prefix, self.ttl_s, *args])

    async def open(self) -> None:
        return None  # the client connects on first use; nothing to migrate

    @translating
    async def ping(self) -> None:
        """Raise unless the server answers (readiness checks)."""
        await self.client.ping()

    async def aclose(self) -> None:
        await self.client.aclose()

    close = aclose

    async def _owned(self, user_id: str, conversation_id: str) -> dict[str, str]:
        data = await self.client.hgetall(self.key("conv", conversation_id))
        if not data or data.get("user_id") != user_id:
            raise _not_found(conversation_id)
        return data

    @translating
    async def create(self, user_id: str, title: str = "") -> Conversation:
        now = time.time()
        conversation_id = new_conversation_id()
        await self._run("create", conversation_id, user_id, title, repr(now))
        return Conversation(id=conversation_id, user_id=user_id, title=title, created_at=now, updated_at=now)

    async def _fetch(self, ids: Sequence[str]) -> list[Conversation | None]:
        async with self.client.pipeline(transaction=True) as pipe:
            for conversation_id in ids:
                pipe.hgetall(self.key("conv", conversation_id))
                pipe.llen(self.key("turns", conversation_id))
            replies = await pipe.execute()
        found: list[Conversation | None] = []
        for conversation_id, data, count in zip(ids, replies[::2], replies[1::2], strict=True):
            found.append(
                Conversation(
                    id=conversation_id,
                    user_id=data["user_id"],
                    title=data["title"],
                    created_at=float(data["created_at"]),
                    updated_at=float(data["updated_at"]),
                    turn_count=count,
                )
                if data
                else None
            )
        return found

    @translating
    async def rename(self, user_id: str, conversation_id: str, title: str) -> Conversation:
        if await self._run("rename", conversation_id, user_id, title) < 0:
            raise _not_found(conversation_id)
        return await self.get(user_id, conversation_id)

    @translating
    async def get(self, user_id: str, conversation_id: str) -> Conversation:
        [found] = await self._fetch([conversation_id])
        if found is None or found.user_id != user_id:
            raise _not_found(conversation_id)
        return found

    @translating
    async def list(self, user_id: str, *, limit: int = 50, offset: int = 0) -> list[Conversation]:
        scored = await self.client.zrange(self.key("user", user_id), 0, -1, withscores=True)
        ordered = [cid for cid, _ in sorted(scored, key=lambda item: (-item[1], item[0]))]
        wanted = offset + limit
        live: list[Conversation] = []
        for start in range(0, len(ordered), 100):  # ids whose keys expired are skipped
            batch = await self._fetch(ordered[start : start + 100])
            live += [c for c in batch if c is not None and c.user_id == user_id]
            if len(live) >= wanted:
                break
        return live[offset:wanted]

    @translating
    async def turns(
        self, user_id: str, conversation_id: str, *, last: int | None = None, start: int = 0, stop: int | None = None
    ) -> list[StoredTurn]:
        await self._owned(user_id, conversation_id)
        key = self.key("turns", conversation_id)
        count = await self.client.llen(key)  # turns are only ever appended: the positions below stay theirs
        high = count if stop is None else min(stop, count)
        low = max(start, 0, high - last if last is not None else 0)
        if high <= low:
            return []
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.lrange(key, low, high - 1)
            pipe.hgetall(self.key("fb", conversation_id))
            raws, votes = await pipe.execute()
        return [_turn(low + n, raw, _feedback(votes, low + n, user_id)) for n, raw in enumerate(raws)]

    @translating
    async def rate(self, user_id: str, conversation_id: str, index: int, vote: Vote, comment: str = "") -> Feedback:
        if index < 0:
            raise TurnNotFoundError(conversation_id, index)
        now = time.time()
        payload = json.dumps({"vote": vote, "comment": comment, "updated_at": now})
        created = await self._run("rate", conversation_id, user_id, str(int(index)), payload, repr(now))
        if created == -1:
            raise TurnNotFoundError(conversation_id, index)
        return Feedback(user_id=user_id, vote=vote, comment=comment, created_at=float(created), updated_at=now)

    @translating
    async def unrate(self, user_id: str, conversation_id: str, index: int) -> bool:
        if index < 0:
            raise TurnNotFoundError(conversation_id, index)
        removed = await self._run("rate", conversation_id, user_id, str(int(index)), "", "0")
        if removed == -1:
            raise TurnNotFoundError(conversation_id, index)
        return removed != "0"

    @translating
    async def logged_turns(self, since: float, until: float, *, limit: int = 100_000) -> list[LoggedTurn]:
        """Conversations active since ``since`` (the ``updated`` index) hold every turn created since then."""
        ids = await self.client.zrangebyscore(self.key("updated"), since, "+inf")
        found: list[LoggedTurn] = []
        for start in range(0, len(ids), 100):
            async with self.client.pipeline(transaction=True) as pipe:
                for conversation_id in ids[start : start + 100]:
                    pipe.hget(self.key("conv", conversation_id), "user_id")
                    pipe.lrange(self.key("turns", conversation_id), 0, -1)
                    pipe.hgetall(self.key("fb", conversation_id))
                replies = await pipe.execute()
            for n, conversation_id in enumerate(ids[start : start + 100]):
                owner, raws, votes = replies[3 * n : 3 * n + 3]
                if owner is None:
                    continue
                for index, raw in enumerate(raws):
                    if since <= json.loads(raw)["created_at"] < until:
                        turn = _turn(index, raw, _feedback(votes, index, owner))
                        found.append(LoggedTurn(user_id=owner, conversation_id=conversation_id, turn=turn))
        found.sort(key=lambda logged: (logged.turn.created_at, logged.conversation_id, logged.turn.index))
        return found[:limit]

    @translating
    async def extend(
        self, user_id: str, conversation_id: str, turns: Sequence[NewTurn], *, start: ChainStart | None = None
    ) -> list[StoredTurn]:
        now = time.time()
        payloads = [_payload(turn, now) for turn in turns]  # serialised first: nothing is written on a failure
        opening = ("1", start.title, start.parent or "", start.upto) if start is not None else ("0", "", "", 0)
        title = turns[0].question[:80] if turns else ""
        first = await self._run("extend", conversation_id, user_id, repr(now), *opening, title, *payloads)
        if first == -2:
            raise ConversationExistsError(conversation_id)
        if first < 0:
            raise _not_found(start.parent if start is not None and start.parent else conversation_id)
        return [turn.stored(first + n, now) for n, turn in enumerate(turns)]

    @translating
    async def delete(self, user_id: str, conversation_id: str) -> None:
        if await self._run("delete", conversation_id, user_id) < 0:
            raise _not_found(conversation_id)

    @staticmethod
    def _counts(reply: Sequence[int]) -> dict[str, int]:
        return {"conversations": int(reply[0]), "turns": int(reply[1]), "summaries": int(reply[2])}

    @translating
    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every conversation of ``user_id`` with its turns and summaries, atomically; returns the counts."""
        return self._counts(await self._run("delete_many", "user", user_id))

    @translating
    async def delete_inactive(self, before_ts: float, *, keep: Iterable[str] = ()) -> dict[str, int]:
        """Delete every conversation whose last activity (``updated_at``) is older than ``before_ts``, with its
        turns and summaries, atomically; ``keep`` names conversations to spare. Returns the counts."""
        return self._counts(await self._run("delete_many", "inactive", repr(float(before_ts)), *sorted(set(keep))))

    @translating
    async def summary(self, user_id: str, conversation_id: str) -> Summary | None:
        await self._owned(user_id, conversation_id)
        versions = await self.client.hgetall(self.key("sums", conversation_id))
        if not versions:
            return None
        covers = max(versions, key=int)
        data = json.loads(versions[covers])
        return Summary(covers_turns=int(covers), text=data["text"], created_at=data["created_at"])

    @translating
    async def save_summary(self, user_id: str, conversation_id: str, covers_turns: int, text: str) -> None:
        payload = json.dumps({"text": text, "created_at": time.time()})
        if await self._run("save_summary", conversation_id, user_id, str(int(covers_turns)), payload) < 0:
            raise _not_found(conversation_id)


class RedisEmbeddingCache:
    """The embedding cache in Redis, shared by replicas: one key per vector (float32 bytes) under
    ``{key_prefix}emb:``, each with a TTL (``ttl_s``) refreshed when it is read or written. Synchronous, like the
    embedders that use it."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        ttl_s: int = DEFAULT_TTL_S,
        key_prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 10.0,
        client: Any = None,
    ) -> None:
        redis_module = require("redis", package="redis", extra="redis", purpose="the Redis embedding cache")
        if ttl_s < 1:
            raise StoreError("the Redis cache needs a TTL of at least one second", hint="set ANAPHORA_REDIS_TTL_S")
        self.ttl_s = int(ttl_s)
        self.prefix = f"{key_prefix}emb:"
        self.client = client or redis_module.Redis.from_url(url, **connection_options(timeout_s, asyncio=False))

    def _call(self, fn, *args: Any) -> Any:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        try:
            return fn(*args)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise _unavailable(exc) from exc

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        return self._call(self._get_many, keys)

    def _get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            batch = list(keys[start : start + 500])
            with self.client.pipeline(transaction=False) as pipe:
                for key in batch:
                    pipe.getex(self.prefix + key, ex=self.ttl_s)  # a hit refreshes the TTL
                values = pipe.execute()
            for key, value in zip(batch, values, strict=True):
                if value is not None:
                    found[key] = np.frombuffer(value, dtype=np.float32)
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        if items:
            self._call(self._put_many, items)

    def _put_many(self, items: dict[str, np.ndarray]) -> None:
        with self.client.pipeline(transaction=False) as pipe:
            for key, vector in items.items():
                pipe.set(self.prefix + key, np.asarray(vector, dtype=np.float32).tobytes(), ex=self.ttl_s)
            pipe.execute()

    def delete_many(self, keys: Sequence[str]) -> int:
        """Forget these entries (right to erase); returns how many existed."""
        if not keys:
            return 0
        return self._call(
            lambda: sum(
                self.client.delete(*[self.prefix + k for k in keys[start : start + 500]])
                for start in range(0, len(keys), 500)
            )
        )

    def close(self) -> None:
        self.client.close()
