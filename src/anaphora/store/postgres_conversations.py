"""PostgreSQL-backed conversations, turns and summaries (psycopg 3, async connection pool).

Same rules as :class:`~anaphora.store.SQLiteConversationStore` (the contract suite in
:mod:`anaphora.testing.store_contract` runs against both), for deployments where several replicas share one
store. The schema is created by numbered migrations on :meth:`PostgresConversationStore.open`, recorded in
``schema_migrations``; timestamps are ``timestamptz`` and citations, traces and shown passages ``jsonb``, so the
history can be queried and audited in SQL (PostgreSQL text cannot hold NUL characters: they are stored as
U+FFFD). Appends lock the conversation row (``SELECT ... FOR UPDATE``), so concurrent appends from any number of
processes get gapless indexes.

Needs the ``postgres`` extra: ``pip install 'anaphora[postgres]'``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from anaphora.errors import ConversationExistsError, ConversationNotFoundError, NotFoundError, TurnNotFoundError
from anaphora.store.migrations import Migrations
from anaphora.store.postgres_pool import AsyncPostgresStore, Migration, run_script
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
from anaphora.store.turn_fields import feedback_of, fields_from_trace
from anaphora.types import Citation, Passage, TurnTrace

MIGRATIONS: Migrations[Migration] = Migrations(
    "the PostgreSQL store", hint="upgrade Anaphora, or point ANAPHORA_POSTGRES_URL at another database"
)
migration = MIGRATIONS  # the decorator that registers a step
_MIGRATION_LOCK = 0x616E6170  # pg_advisory_xact_lock key: replicas starting together migrate one at a time


@migration
async def m001_conversations(conn: Any) -> None:
    await run_script(
        conn,
        """
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            title TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX conversations_user ON conversations (user_id, updated_at DESC, id);
        CREATE INDEX conversations_updated ON conversations (updated_at);
        CREATE TABLE turns (
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            idx INTEGER NOT NULL CHECK (idx >= 0),
            question TEXT NOT NULL,
            answer TEXT NOT NULL,
            citations JSONB NOT NULL,
            trace JSONB,
            created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (conversation_id, idx)
        )
        """,
    )


@migration
async def m002_summaries(conn: Any) -> None:
    """Every version of a conversation's rolling summary is kept (audit); the one covering most turns is used."""
    await run_script(
        conn,
        """
        CREATE TABLE summaries (
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            covers_turns INTEGER NOT NULL,
            text TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (conversation_id, covers_turns)
        )
        """,
    )


@migration
async def m003_turn_window_fields(conn: Any) -> None:
    """What the next turn reads of a stored turn gets its own columns (the trace is audit only); existing turns
    get them from their trace, once (:mod:`anaphora.store.turn_fields`). ``window_start`` NULL: unknown."""
    await run_script(
        conn,
        """
        ALTER TABLE turns ADD COLUMN shown_passages JSONB NOT NULL DEFAULT '[]'::jsonb;
        ALTER TABLE turns ADD COLUMN window_start INTEGER
        """,
    )
    async with conn.cursor(name="turns_before_window_fields") as reader, conn.cursor() as writer:
        await reader.execute("SELECT conversation_id, idx, trace FROM turns WHERE trace IS NOT NULL")
        while rows := await reader.fetchmany(500):  # a server-side cursor: the traces are never all in memory
            updates = []
            for row in rows:
                shown, start = fields_from_trace(row["trace"], row["idx"])
                if shown or start is not None:
                    updates.append((_json(shown), start, row["conversation_id"], row["idx"]))
            if updates:
                await writer.executemany(
                    "UPDATE turns SET shown_passages = %s::jsonb, window_start = %s "
                    "WHERE conversation_id = %s AND idx = %s",
                    updates,
                )


@migration
async def m004_feedback(conn: Any) -> None:
    """Votes on answers (issue 49): one per turn per user, kept with the turn (it goes when the turn goes); the
    operator's report reads turns by time across users."""
    await run_script(
        conn,
        """
        CREATE TABLE feedback (
            conversation_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            user_id TEXT NOT NULL,
            vote TEXT NOT NULL CHECK (vote IN ('up', 'down')),
            comment TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (conversation_id, idx, user_id),
            FOREIGN KEY (conversation_id, idx) REFERENCES turns (conversation_id, idx) ON DELETE CASCADE
        );
        CREATE INDEX turns_created ON turns (created_at)
        """,
    )


def _now() -> datetime:
    """The current time at the microsecond precision of ``timestamptz``, so what is returned is what is stored."""
    return datetime.fromtimestamp(time.time(), UTC)


def _ts(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _text(value: str) -> str:
    """PostgreSQL text (and jsonb) cannot hold NUL characters; they are stored as U+FFFD instead of failing."""
    return value.replace("\x00", "\ufffd")


def _json(value: Any) -> str:
    """``value`` (plain JSON data) as JSON text for a jsonb column, NUL characters replaced as in :func:`_text`."""

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            return _text(item)
        if isinstance(item, list):
            return [clean(x) for x in item]
        if isinstance(item, dict):
            return {_text(k): clean(v) for k, v in item.items()}
        return item

    return json.dumps(clean(value))


def _row(turn: NewTurn) -> tuple:
    """A turn's columns from ``question`` to ``window_start``, as stored (NaN and infinities as null, as SQLite
    stores them)."""
    trace = json.loads(turn.trace.model_dump_json()) if turn.trace is not None else None
    return (
        _text(turn.question),
        _text(turn.answer),
        _json([json.loads(c.model_dump_json()) for c in turn.citations]),
        _json(trace) if trace is not None else None,
        _json([json.loads(p.model_dump_json()) for p in turn.shown_passages]),
        turn.window_start,
    )


def _not_found(conversation_id: str) -> NotFoundError:
    return ConversationNotFoundError(conversation_id)


def _nameable(user_id: str, conversation_id: str) -> None:
    """An id holding NUL names nothing here (PostgreSQL text cannot even compare it): not found, as on SQLite."""
    if "\x00" in user_id or "\x00" in conversation_id:
        raise _not_found(conversation_id)


# a turn with its vote by user %s, the first parameter of any statement that uses it
_TURNS = (
    "SELECT t.*, f.user_id AS fb_user, f.vote AS fb_vote, f.comment AS fb_comment, f.created_at AS fb_created, "
    "f.updated_at AS fb_updated FROM turns t LEFT JOIN feedback f ON f.conversation_id = t.conversation_id "
    "AND f.idx = t.idx AND f.user_id = %s"
)
_SELECT = (
    "SELECT c.id, c.user_id, c.title, c.created_at, c.updated_at, "
    "(SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turn_count FROM conversations c"
)


def _conversation(row: dict[str, Any]) -> Conversation:
    return Conversation(
        id=row["id"],
        user_id=row["user_id"],
        title=row["title"],
        created_at=row["created_at"].timestamp(),
        updated_at=row["updated_at"].timestamp(),
        turn_count=row["turn_count"],
    )


def _turn(row: dict[str, Any]) -> StoredTurn:
    return StoredTurn(
        index=row["idx"],
        question=row["question"],
        answer=row["answer"],
        citations=[Citation.model_validate(c) for c in row["citations"]],
        trace=TurnTrace.model_validate(row["trace"]) if row["trace"] is not None else None,
        shown_passages=[Passage.model_validate(p) for p in row["shown_passages"]],
        window_start=row["window_start"],
        created_at=row["created_at"].timestamp(),
        feedback=feedback_of(row, datetime.timestamp),
    )


class PostgresConversationStore(AppendThroughExtend, AsyncPostgresStore):
    """Conversations in PostgreSQL. Construction is cheap and synchronous; the pool opens (and the schema is
    migrated) on :meth:`open` or on first use. Close it with :meth:`aclose`."""

    PURPOSE = "the PostgreSQL conversation store"
    MIGRATIONS = MIGRATIONS
    MIGRATIONS_TABLE = "schema_migrations"
    MIGRATION_LOCK = _MIGRATION_LOCK

    close = AsyncPostgresStore.aclose

    async def _owned(self, conn: Any, user_id: str, conversation_id: str, *, lock: bool = False) -> dict[str, Any]:
        _nameable(user_id, conversation_id)
        cursor = await conn.execute(
            "SELECT user_id, title FROM conversations WHERE id = %s" + (" FOR UPDATE" if lock else ""),
            (conversation_id,),
        )
        row = await cursor.fetchone()
        if row is None or row["user_id"] != user_id:
            raise _not_found(conversation_id)
        return row

    async def create(self, user_id: str, title: str = "") -> Conversation:
        now = _now()
        conversation_id = new_conversation_id()
        async with await self._conn() as conn:
            await conn.execute(
                "INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)",
                (conversation_id, user_id, _text(title), now, now),
            )
        stamp = now.timestamp()
        return Conversation(id=conversation_id, user_id=user_id, title=title, created_at=stamp, updated_at=stamp)

    async def get(self, user_id: str, conversation_id: str) -> Conversation:
        _nameable(user_id, conversation_id)
        async with await self._conn() as conn:
            cursor = await conn.execute(f"{_SELECT} WHERE c.id = %s AND c.user_id = %s", (conversation_id, user_id))
            row = await cursor.fetchone()
        if row is None:
            raise _not_found(conversation_id)
        return _conversation(row)

    async def rename(self, user_id: str, conversation_id: str, title: str) -> Conversation:
        _nameable(user_id, conversation_id)
        async with await self._conn() as conn:
            await conn.execute(
                "UPDATE conversations SET title = %s WHERE id = %s AND user_id = %s",
                (_text(title), conversation_id, user_id),
            )
        return await self.get(user_id, conversation_id)

    async def list(self, user_id: str, *, limit: int = 50, offset: int = 0) -> list[Conversation]:
        async with await self._conn() as conn:
            cursor = await conn.execute(
                f"{_SELECT} WHERE c.user_id = %s ORDER BY c.updated_at DESC, c.id LIMIT %s OFFSET %s",
                (user_id, limit, offset),
            )
            return [_conversation(r) for r in await cursor.fetchall()]

    async def turns(
        self, user_id: str, conversation_id: str, *, last: int | None = None, start: int = 0, stop: int | None = None
    ) -> list[StoredTurn]:
        where = "t.conversation_id = %s AND t.idx >= %s" + (" AND t.idx < %s" if stop is not None else "")
        params: tuple = (conversation_id, start) + ((stop,) if stop is not None else ())
        async with await self._conn() as conn:
            await self._owned(conn, user_id, conversation_id)
            if last is None:
                cursor = await conn.execute(f"{_TURNS} WHERE {where} ORDER BY t.idx", (user_id, *params))
            else:
                cursor = await conn.execute(
                    f"SELECT * FROM ({_TURNS} WHERE {where} ORDER BY t.idx DESC LIMIT %s) x ORDER BY idx",
                    (user_id, *params, max(last, 0)),
                )
            return [_turn(r) for r in await cursor.fetchall()]

    async def _check_owned_turn(self, conn: Any, user_id: str, conversation_id: str, index: int) -> None:
        cursor = await conn.execute(
            "SELECT 1 FROM turns t JOIN conversations c ON c.id = t.conversation_id "
            "WHERE t.conversation_id = %s AND t.idx = %s AND c.user_id = %s",
            (conversation_id, index, user_id),
        )
        if await cursor.fetchone() is None:
            raise TurnNotFoundError(conversation_id, index)

    async def rate(self, user_id: str, conversation_id: str, index: int, vote: Vote, comment: str = "") -> Feedback:
        now = _now()
        async with await self._conn() as conn, conn.transaction():
            await self._check_owned_turn(conn, user_id, conversation_id, index)
            cursor = await conn.execute(
                "INSERT INTO feedback (conversation_id, idx, user_id, vote, comment, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (conversation_id, idx, user_id) DO UPDATE SET "
                "vote = EXCLUDED.vote, comment = EXCLUDED.comment, updated_at = EXCLUDED.updated_at "
                "RETURNING created_at",
                (conversation_id, index, user_id, vote, _text(comment), now, now),
            )
            created = (await cursor.fetchone())["created_at"]
        return Feedback(
            user_id=user_id, vote=vote, comment=comment, created_at=created.timestamp(), updated_at=now.timestamp()
        )

    async def unrate(self, user_id: str, conversation_id: str, index: int) -> bool:
        async with await self._conn() as conn, conn.transaction():
            await self._check_owned_turn(conn, user_id, conversation_id, index)
            cursor = await conn.execute(
                "DELETE FROM feedback WHERE conversation_id = %s AND idx = %s AND user_id = %s",
                (conversation_id, index, user_id),
            )
            return bool(cursor.rowcount)

    async def logged_turns(self, since: float, until: float, *, limit: int = 100_000) -> list[LoggedTurn]:
        async with await self._conn() as conn:
            cursor = await conn.execute(
                "SELECT t.*, c.user_id AS owner, f.user_id AS fb_user, f.vote AS fb_vote, f.comment AS fb_comment, "
                "f.created_at AS fb_created, f.updated_at AS fb_updated FROM turns t "
                "JOIN conversations c ON c.id = t.conversation_id LEFT JOIN feedback f ON f.conversation_id = "
                "t.conversation_id AND f.idx = t.idx AND f.user_id = c.user_id WHERE t.created_at >= %s "
                "AND t.created_at < %s ORDER BY t.created_at, t.conversation_id, t.idx LIMIT %s",
                (_ts(since), _ts(until), limit),
            )
            rows = await cursor.fetchall()
        return [LoggedTurn(user_id=r["owner"], conversation_id=r["conversation_id"], turn=_turn(r)) for r in rows]

    async def _open(self, conn: Any, user_id: str, conversation_id: str, start: ChainStart, now: datetime) -> None:
        """Create the conversation a write starts, with a branch's turns copied from its parent (in the server)."""
        title = _text(start.title)
        if start.parent is not None:
            parent = await self._owned(conn, user_id, start.parent)
            cursor = await conn.execute(
                "SELECT COUNT(*) AS held FROM turns WHERE conversation_id = %s AND idx < %s",
                (start.parent, start.upto),
            )
            if (await cursor.fetchone())["held"] < start.upto:
                raise _not_found(start.parent)
            title = title or parent["title"]
        cursor = await conn.execute(
            "INSERT INTO conversations (id, user_id, title, created_at, updated_at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (conversation_id, user_id, title, now, now),
        )
        if not cursor.rowcount:
            raise ConversationExistsError(conversation_id)
        if start.parent is not None and start.upto:
            await conn.execute(
                "INSERT INTO turns (conversation_id, idx, question, answer, citations, trace, shown_passages, "
                "window_start, created_at) SELECT %s, idx, question, answer, citations, trace, shown_passages, "
                "window_start, created_at FROM turns WHERE conversation_id = %s AND idx < %s",
                (conversation_id, start.parent, start.upto),
            )

    async def extend(
        self, user_id: str, conversation_id: str, turns: Sequence[NewTurn], *, start: ChainStart | None = None
    ) -> list[StoredTurn]:
        rows = [_row(turn) for turn in turns]  # serialised first: a turn that cannot be leaves nothing written
        now = _now()
        async with await self._conn() as conn, conn.transaction():
            if start is not None:
                await self._open(conn, user_id, conversation_id, start, now)
            owner = await self._owned(conn, user_id, conversation_id, lock=True)  # serialises appends
            cursor = await conn.execute(
                "SELECT COALESCE(MAX(idx) + 1, 0) AS next FROM turns WHERE conversation_id = %s", (conversation_id,)
            )
            first = (await cursor.fetchone())["next"]
            async with conn.cursor() as writer:
                await writer.executemany(
                    "INSERT INTO turns (conversation_id, idx, question, answer, citations, trace, shown_passages, "
                    "window_start, created_at) VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s, %s)",
                    [(conversation_id, first + n, *row, now) for n, row in enumerate(rows)],
                )
            title = owner["title"] or (_text(turns[0].question[:80]) if turns else "")
            await conn.execute(
                "UPDATE conversations SET updated_at = %s, title = %s WHERE id = %s", (now, title, conversation_id)
            )
        return [turn.stored(first + n, now.timestamp()) for n, turn in enumerate(turns)]

    async def delete(self, user_id: str, conversation_id: str) -> None:
        _nameable(user_id, conversation_id)
        async with await self._conn() as conn:
            cursor = await conn.execute(
                "DELETE FROM conversations WHERE id = %s AND user_id = %s", (conversation_id, user_id)
            )
            if not cursor.rowcount:
                raise _not_found(conversation_id)

    async def _delete(self, conn: Any, where: str, params: tuple) -> dict[str, int]:
        """Delete the conversations matching ``where`` with their turns and summaries; count all three."""
        cursor = await conn.execute(f"SELECT id FROM conversations WHERE {where} ORDER BY id FOR UPDATE", params)
        ids = [row["id"] for row in await cursor.fetchall()]
        counts = {}
        for name in ("turns", "summaries", "conversations"):
            column = "id" if name == "conversations" else "conversation_id"
            cursor = await conn.execute(f"DELETE FROM {name} WHERE {column} = ANY(%s)", (ids,))
            counts[name] = cursor.rowcount
        return {"conversations": counts["conversations"], "turns": counts["turns"], "summaries": counts["summaries"]}

    async def delete_inactive(self, before_ts: float, *, keep: Iterable[str] = ()) -> dict[str, int]:
        """Delete every conversation whose last activity (``updated_at``) is older than ``before_ts``, with its
        turns and summaries, in one transaction; ``keep`` names conversations to spare. Returns the counts."""
        async with await self._conn() as conn, conn.transaction():
            return await self._delete(conn, "updated_at < %s AND NOT (id = ANY(%s))", (_ts(before_ts), sorted(keep)))

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every conversation of ``user_id`` with its turns and summaries, atomically; returns the counts."""
        async with await self._conn() as conn, conn.transaction():
            return await self._delete(conn, "user_id = %s", (user_id,))

    async def summary(self, user_id: str, conversation_id: str) -> Summary | None:
        async with await self._conn() as conn:
            await self._owned(conn, user_id, conversation_id)
            cursor = await conn.execute(
                "SELECT covers_turns, text, created_at FROM summaries WHERE conversation_id = %s "
                "ORDER BY covers_turns DESC LIMIT 1",
                (conversation_id,),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        return Summary(covers_turns=row["covers_turns"], text=row["text"], created_at=row["created_at"].timestamp())

    async def save_summary(self, user_id: str, conversation_id: str, covers_turns: int, text: str) -> None:
        async with await self._conn() as conn, conn.transaction():
            await self._owned(conn, user_id, conversation_id, lock=True)
            await conn.execute(
                "INSERT INTO summaries (conversation_id, covers_turns, text, created_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (conversation_id, covers_turns) DO UPDATE SET text = EXCLUDED.text, "
                "created_at = EXCLUDED.created_at",
                (conversation_id, covers_turns, _text(text), _now()),
            )
