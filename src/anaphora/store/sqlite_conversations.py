"""SQLite-backed conversations and turns.

Blocking by design: the methods are ``async`` to keep the one ``ConversationStore`` Protocol, but each runs its
SQLite statements on the event loop's thread. They are a few indexed statements on a local WAL database (well under
a millisecond for an append or a window's turns), less than a worker-thread hop costs, and the database's one
connection is serialised by its lock anyway. The one long write, a branch's copy of a chain's turns, runs in a worker
thread; while it holds the database, the other calls run in worker threads too (:func:`inline_unless_busy`), so none
waits for it on the event loop. A store whose calls can wait (PostgreSQL, Redis) is truly async.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence

from anaphora.errors import ConversationExistsError, ConversationNotFoundError, TurnNotFoundError
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
from anaphora.store.sqlite_database import Database, inline_unless_busy
from anaphora.store.turn_fields import feedback_of
from anaphora.types import Citation, Passage, TurnTrace

# a turn with its vote by user ?, the first parameter of any statement that uses it
_TURNS = (
    "SELECT t.*, f.user_id AS fb_user, f.vote AS fb_vote, f.comment AS fb_comment, f.created_at AS fb_created, "
    "f.updated_at AS fb_updated FROM turns t LEFT JOIN feedback f ON f.conversation_id = t.conversation_id "
    "AND f.idx = t.idx AND f.user_id = ?"
)
_SELECT = "SELECT c.*, (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turn_count FROM conversations c"


def _conversation(row) -> Conversation:
    return Conversation(
        id=row["id"],
        user_id=row["user_id"],
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        turn_count=row["turn_count"],
    )


def _turn(row) -> StoredTurn:
    return StoredTurn(
        index=row["idx"],
        question=row["question"],
        answer=row["answer"],
        citations=[Citation.model_validate(c) for c in json.loads(row["citations"])],
        trace=TurnTrace.model_validate_json(row["trace"]) if row["trace"] != "null" else None,
        shown_passages=[Passage.model_validate(p) for p in json.loads(row["shown_passages"])],
        window_start=row["window_start"],
        created_at=row["created_at"],
        feedback=feedback_of(row),
    )


def _row(turn: NewTurn) -> tuple:
    """A turn's columns from ``question`` to ``window_start``, as stored."""
    return (
        turn.question,
        turn.answer,
        json.dumps([c.model_dump() for c in turn.citations]),
        turn.trace.model_dump_json() if turn.trace is not None else "null",
        json.dumps([json.loads(p.model_dump_json()) for p in turn.shown_passages]),
        turn.window_start,
    )


def _open(db: sqlite3.Connection, user_id: str, conversation_id: str, start: ChainStart, now: float) -> None:
    """Create the conversation a write starts, with a branch's turns copied from its parent."""
    title = start.title
    if start.parent is not None:
        parent = db.execute("SELECT user_id, title FROM conversations WHERE id = ?", (start.parent,)).fetchone()
        held = db.execute(
            "SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND idx < ?", (start.parent, start.upto)
        ).fetchone()[0]
        if parent is None or parent["user_id"] != user_id or held < start.upto:
            raise ConversationNotFoundError(start.parent)
        title = title or parent["title"]
    if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is not None:
        raise ConversationExistsError(conversation_id)
    db.execute(
        "INSERT INTO conversations(id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        (conversation_id, user_id, title, now, now),
    )
    if start.parent is not None and start.upto:
        db.execute(
            "INSERT INTO turns(conversation_id, idx, question, answer, citations, trace, shown_passages, "
            "window_start, created_at) SELECT ?, idx, question, answer, citations, trace, shown_passages, "
            "window_start, created_at FROM turns WHERE conversation_id = ? AND idx < ?",
            (conversation_id, start.parent, start.upto),
        )


def _delete(db, select_ids: str, params: tuple) -> dict[str, int]:
    """Delete the conversations ``select_ids`` selects (turns and summaries cascade); count all three first."""
    counts = {}
    for name, table in (("turns", "turns"), ("summaries", "summaries")):
        counts[name] = db.execute(
            f"SELECT COUNT(*) FROM {table} WHERE conversation_id IN ({select_ids})", params
        ).fetchone()[0]
    counts["conversations"] = db.execute(f"DELETE FROM conversations WHERE id IN ({select_ids})", params).rowcount
    return {"conversations": counts["conversations"], "turns": counts["turns"], "summaries": counts["summaries"]}


def _check_owned_turn(db, user_id: str, conversation_id: str, index: int) -> None:
    found = db.execute(
        "SELECT 1 FROM turns t JOIN conversations c ON c.id = t.conversation_id "
        "WHERE t.conversation_id = ? AND t.idx = ? AND c.user_id = ?",
        (conversation_id, index, user_id),
    ).fetchone()
    if found is None:
        raise TurnNotFoundError(conversation_id, index)


class SQLiteConversationStore(AppendThroughExtend):
    def __init__(self, db: Database) -> None:
        self.db = db
        self._copying: asyncio.Lock | None = None  # one branch's copy at a time (made in the running loop)

    async def open(self) -> None:
        return None  # the database was opened (and migrated) when it was built

    @inline_unless_busy
    def ping(self) -> None:
        self.db.query("SELECT 1")

    async def aclose(self) -> None:
        return None  # the database is closed by its owner (close_local)

    @inline_unless_busy
    def create(self, user_id: str, title: str = "") -> Conversation:
        now = time.time()
        conversation_id = new_conversation_id()
        with self.db.transaction() as db:
            db.execute(
                "INSERT INTO conversations(id, user_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (conversation_id, user_id, title, now, now),
            )
        return Conversation(id=conversation_id, user_id=user_id, title=title, created_at=now, updated_at=now)

    def _get(self, user_id: str, conversation_id: str) -> Conversation:
        rows = self.db.query(f"{_SELECT} WHERE c.id = ? AND c.user_id = ?", (conversation_id, user_id))
        if not rows:
            raise ConversationNotFoundError(conversation_id)
        return _conversation(rows[0])

    get = inline_unless_busy(_get)

    @inline_unless_busy
    def list(self, user_id: str, *, limit: int = 50, offset: int = 0) -> list[Conversation]:
        rows = self.db.query(
            f"{_SELECT} WHERE c.user_id = ? ORDER BY c.updated_at DESC, c.id LIMIT ? OFFSET ?",
            (user_id, limit, offset),
        )
        return [_conversation(r) for r in rows]

    @inline_unless_busy
    def turns(
        self, user_id: str, conversation_id: str, *, last: int | None = None, start: int = 0, stop: int | None = None
    ) -> list[StoredTurn]:
        self._get(user_id, conversation_id)
        where = "t.conversation_id = ? AND t.idx >= ?" + (" AND t.idx < ?" if stop is not None else "")
        params: tuple = (conversation_id, start) + ((stop,) if stop is not None else ())
        if last is None:
            rows = self.db.query(f"{_TURNS} WHERE {where} ORDER BY t.idx", (user_id, *params))
        else:
            rows = self.db.query(
                f"SELECT * FROM ({_TURNS} WHERE {where} ORDER BY t.idx DESC LIMIT ?) ORDER BY idx",
                (user_id, *params, max(last, 0)),
            )
        return [_turn(r) for r in rows]

    async def rate(self, user_id: str, conversation_id: str, index: int, vote: Vote, comment: str = "") -> Feedback:
        now = time.time()
        with self.db.transaction() as db:
            _check_owned_turn(db, user_id, conversation_id, index)
            db.execute(
                "INSERT INTO feedback(conversation_id, idx, user_id, vote, comment, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(conversation_id, idx, user_id) DO UPDATE SET "
                "vote = excluded.vote, comment = excluded.comment, updated_at = excluded.updated_at",
                (conversation_id, index, user_id, vote, comment, now, now),
            )
            row = db.execute(
                "SELECT created_at FROM feedback WHERE conversation_id = ? AND idx = ? AND user_id = ?",
                (conversation_id, index, user_id),
            ).fetchone()
        return Feedback(user_id=user_id, vote=vote, comment=comment, created_at=row[0], updated_at=now)

    async def unrate(self, user_id: str, conversation_id: str, index: int) -> bool:
        with self.db.transaction() as db:
            _check_owned_turn(db, user_id, conversation_id, index)
            return bool(
                db.execute(
                    "DELETE FROM feedback WHERE conversation_id = ? AND idx = ? AND user_id = ?",
                    (conversation_id, index, user_id),
                ).rowcount
            )

    async def logged_turns(self, since: float, until: float, *, limit: int = 100_000) -> list[LoggedTurn]:
        rows = self.db.query(
            "SELECT t.*, c.user_id AS owner, f.user_id AS fb_user, f.vote AS fb_vote, f.comment AS fb_comment, "
            "f.created_at AS fb_created, f.updated_at AS fb_updated FROM turns t "
            "JOIN conversations c ON c.id = t.conversation_id LEFT JOIN feedback f ON f.conversation_id = "
            "t.conversation_id AND f.idx = t.idx AND f.user_id = c.user_id "
            "WHERE t.created_at >= ? AND t.created_at < ? ORDER BY t.created_at, t.conversation_id, t.idx LIMIT ?",
            (since, until, limit),
        )
        return [LoggedTurn(user_id=r["owner"], conversation_id=r["conversation_id"], turn=_turn(r)) for r in rows]

    async def extend(
        self, user_id: str, conversation_id: str, turns: Sequence[NewTurn], *, start: ChainStart | None = None
    ) -> list[StoredTurn]:
        """In one transaction; a branch's copy (one ``INSERT ... SELECT``) always runs in a worker thread, so a long
        chain is copied without holding up the event loop."""
        rows = [_row(turn) for turn in turns]  # serialised first: a turn that cannot be leaves nothing written
        if start is not None and start.parent is not None:
            # copies queue here, not in worker threads that would each wait for the database and leave none for
            # the calls that go to a thread while it is busy
            self._copying = self._copying or asyncio.Lock()
            async with self._copying:
                return await asyncio.to_thread(self._extend, user_id, conversation_id, turns, rows, start)
        return await self._extend_inline(user_id, conversation_id, turns, rows, start)

    def _extend(
        self,
        user_id: str,
        conversation_id: str,
        turns: Sequence[NewTurn],
        rows: list[tuple],
        start: ChainStart | None,
    ) -> list[StoredTurn]:
        now = time.time()
        with self.db.transaction() as db:
            if start is not None:
                _open(db, user_id, conversation_id, start, now)
            owner = db.execute("SELECT user_id, title FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            if owner is None or owner["user_id"] != user_id:
                raise ConversationNotFoundError(conversation_id)
            first = db.execute(
                "SELECT COALESCE(MAX(idx) + 1, 0) FROM turns WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()[0]
            db.executemany(
                "INSERT INTO turns(conversation_id, idx, question, answer, citations, trace, shown_passages, "
                "window_start, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(conversation_id, first + n, *row, now) for n, row in enumerate(rows)],
            )
            title = owner["title"] or (turns[0].question[:80] if turns else "")
            db.execute("UPDATE conversations SET updated_at = ?, title = ? WHERE id = ?", (now, title, conversation_id))
        return [turn.stored(first + n, now) for n, turn in enumerate(turns)]

    _extend_inline = inline_unless_busy(_extend)

    @inline_unless_busy
    def rename(self, user_id: str, conversation_id: str, title: str) -> Conversation:
        with self.db.transaction() as db:
            db.execute(
                "UPDATE conversations SET title = ? WHERE id = ? AND user_id = ?", (title, conversation_id, user_id)
            )
        return self._get(user_id, conversation_id)

    @inline_unless_busy
    def delete(self, user_id: str, conversation_id: str) -> None:
        with self.db.transaction() as db:
            deleted = db.execute(
                "DELETE FROM conversations WHERE id = ? AND user_id = ?", (conversation_id, user_id)
            ).rowcount
        if not deleted:
            raise ConversationNotFoundError(conversation_id)

    @inline_unless_busy
    def delete_inactive(self, before_ts: float, *, keep: Iterable[str] = ()) -> dict[str, int]:
        """Delete every conversation whose last activity (``updated_at``) is older than ``before_ts``, with its
        turns and summaries, in one transaction; ``keep`` names conversations to spare (e.g. a turn in flight).
        Returns how many conversations, turns and summaries went."""
        spared = sorted(set(keep))
        marks = ",".join("?" * len(spared))
        where = "updated_at < ?" + (f" AND id NOT IN ({marks})" if spared else "")
        with self.db.transaction() as db:
            return _delete(db, f"SELECT id FROM conversations WHERE {where}", (before_ts, *spared))

    @inline_unless_busy
    def erase_user(self, user_id: str) -> dict[str, int]:
        """Delete every conversation of ``user_id`` with its turns and summaries, atomically; returns the counts."""
        with self.db.transaction() as db:
            return _delete(db, "SELECT id FROM conversations WHERE user_id = ?", (user_id,))

    @inline_unless_busy
    def summary(self, user_id: str, conversation_id: str) -> Summary | None:
        self._get(user_id, conversation_id)
        rows = self.db.query(
            "SELECT covers_turns, text, created_at FROM summaries WHERE conversation_id = ? "
            "ORDER BY covers_turns DESC LIMIT 1",
            (conversation_id,),
        )
        return Summary(**dict(rows[0])) if rows else None

    @inline_unless_busy
    def save_summary(self, user_id: str, conversation_id: str, covers_turns: int, text: str) -> None:
        with self.db.transaction() as db:
            owner = db.execute("SELECT user_id FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            if owner is None or owner["user_id"] != user_id:
                raise ConversationNotFoundError(conversation_id)
            db.execute(
                "INSERT INTO summaries(conversation_id, covers_turns, text, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(conversation_id, covers_turns) DO UPDATE SET text = excluded.text, "
                "created_at = excluded.created_at",
                (conversation_id, covers_turns, text, time.time()),
            )
