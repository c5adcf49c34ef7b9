"""Store interfaces. SQLite, PostgreSQL and Redis implement them; every backend must keep the same rules, which the
contract suites in :mod:`anaphora.testing` check (conversations, document registry and passage index, sessions,
turn locks)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

import numpy as np
from pydantic import BaseModel, Field

from anaphora.errors import ConfigurationError
from anaphora.types import Chunk, Citation, Passage, TurnTrace

if TYPE_CHECKING:
    from anaphora.retrieval.terms import TermStatistics


class Conversation(BaseModel):
    id: str
    user_id: str
    title: str
    created_at: float
    updated_at: float
    turn_count: int = 0


class NewTurn(BaseModel):
    """A turn as it is appended. ``trace`` is the audit record (the API payload), never read to build a later
    prompt; what the next turn needs is in the explicit fields: ``shown_passages``, the document passages the
    answer was given from (shown again as history excerpts), and ``window_start``, the index of the oldest earlier
    turn its prompt showed verbatim (None: unknown), where the next turn's window goes on from."""

    question: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    trace: TurnTrace | None = None
    shown_passages: list[Passage] = Field(default_factory=list)
    window_start: int | None = None

    def stored(self, index: int, created_at: float) -> StoredTurn:
        """This turn as a store returns it once written at ``index``."""
        return StoredTurn(
            question=self.question,
            answer=self.answer,
            citations=list(self.citations),
            trace=self.trace,
            shown_passages=list(self.shown_passages),
            window_start=self.window_start,
            index=index,
            created_at=created_at,
        )


Vote = Literal["up", "down"]
MAX_COMMENT_CHARS = 2000  # a vote's comment: a few sentences, not a document


class Feedback(BaseModel):
    """A reader's vote on one answer, with an optional comment: one per answer per user, changed in place (so
    ``updated_at`` moves and ``created_at`` stays)."""

    user_id: str
    vote: Vote
    comment: str = ""
    created_at: float
    updated_at: float


class StoredTurn(NewTurn):
    index: int
    created_at: float
    feedback: Feedback | None = Field(default=None, description="the reading user's vote on this answer, if any")


class LoggedTurn(BaseModel):
    """A stored turn with whose it is, as an operator's report reads it (:class:`TurnLog`)."""

    user_id: str
    conversation_id: str
    turn: StoredTurn


class ChainStart(BaseModel):
    """A conversation that a write creates in the same transaction as its turns, so a turn that fails or is killed
    leaves no conversation behind. ``parent``: a branch, holding the first ``upto`` turns of that conversation of
    the same user, copied as they are (their indexes, times, traces); ``title``: none takes the parent's title, or
    the first question's."""

    title: str = ""
    parent: str | None = None
    upto: int = Field(default=0, ge=0)


def new_conversation_id() -> str:
    """A fresh conversation id, the same shape every store gives (a caller may choose it: :class:`ChainStart`)."""
    return uuid.uuid4().hex[:12]


class ConversationStore(Protocol):
    """Conversations and their turns, owned by a user.

    Rules: a turn (question, answer, citations, trace and the fields the next turn reads, ``shown_passages`` and
    ``window_start``) is appended atomically or not at all, and read back as it was given; turn indexes are
    0, 1, 2, ... without gaps; ``extend`` writes several turns (and the conversation they open, with a branch's
    copied turns) in one transaction; every read and write is scoped to ``user_id`` and an id owned by another user
    is reported as missing (:class:`anaphora.errors.NotFoundError`), never revealed.
    """

    async def open(self) -> None:
        """Connect and bring the schema up to date (a networked store); safe to call more than once."""
        ...

    async def ping(self) -> None:
        """Raise unless the store answers (the readiness check)."""
        ...

    async def aclose(self) -> None: ...

    async def create(self, user_id: str, title: str = "") -> Conversation: ...

    async def get(self, user_id: str, conversation_id: str) -> Conversation: ...

    async def list(self, user_id: str, *, limit: int = 50, offset: int = 0) -> list[Conversation]: ...

    async def turns(
        self, user_id: str, conversation_id: str, *, last: int | None = None, start: int = 0, stop: int | None = None
    ) -> list[StoredTurn]:
        """The turns with ``start <= index < stop`` (``stop`` None: to the end), oldest first; with ``last``, only
        the last ``last`` of them. A page of a long conversation is read without reading the rest."""
        ...

    async def append_turn(self, user_id: str, conversation_id: str, turn: NewTurn) -> StoredTurn:
        """Append one turn: ``extend`` with one."""
        ...

    async def extend(
        self, user_id: str, conversation_id: str, turns: Sequence[NewTurn], *, start: ChainStart | None = None
    ) -> list[StoredTurn]:
        """Append ``turns`` in order, in one transaction: all of them or none. With ``start`` the write creates the
        conversation ``conversation_id`` first (a :class:`ChainStart`; an id already taken is refused), in the
        same transaction; a ``start.parent`` that is missing, another user's or shorter than ``start.upto`` is
        reported as missing. Long copies never block the event loop."""
        ...

    async def rename(self, user_id: str, conversation_id: str, title: str) -> Conversation:
        """Set the title; activity (``updated_at``) and the turns are untouched. Returns the conversation."""
        ...

    async def delete(self, user_id: str, conversation_id: str) -> None: ...

    async def erase_user(self, user_id: str) -> dict[str, int]:
        """Right to erase: delete all of ``user_id``'s conversations with their turns and summaries, atomically.
        Returns ``{"conversations": n, "turns": n, "summaries": n}``."""
        ...

    async def delete_inactive(self, before_ts: float, *, keep: Iterable[str] = ()) -> dict[str, int]:
        """History TTL: delete every conversation last active (``updated_at``) strictly before ``before_ts``, except
        those named in ``keep``, with their turns and summaries, atomically. Returns the counts as ``erase_user``."""
        ...


class EmbeddingCache(Protocol):
    """Vectors keyed by a hash of (embedder name, text). Misses are returned as absent keys."""

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]: ...

    def put_many(self, items: dict[str, np.ndarray]) -> None: ...

    def delete_many(self, keys: Sequence[str]) -> int: ...

    def close(self) -> None:
        """Release a network client; a cache inside the SQLite database has nothing of its own to close."""
        ...


class Summary(BaseModel):
    covers_turns: int
    text: str
    created_at: float


class SummaryStore(Protocol):
    """Rolling summaries of a conversation's older turns. Saving never touches the turns themselves; every
    version is kept and the one covering the most turns is current."""

    async def summary(self, user_id: str, conversation_id: str) -> Summary | None: ...

    async def save_summary(self, user_id: str, conversation_id: str, covers_turns: int, text: str) -> None: ...


class FeedbackStore(Protocol):
    """Votes on answers, kept with their turns.

    Rules: a user votes only on a turn of a conversation they own (any other turn, or one that does not exist, is
    :class:`~anaphora.errors.TurnNotFoundError`, never revealed); one vote per answer per user, a new vote
    replacing the old one (``created_at`` kept); the vote is read back with the turn (``StoredTurn.feedback``) and
    goes with it when the conversation is deleted, swept or erased.
    """

    async def rate(self, user_id: str, conversation_id: str, index: int, vote: Vote, comment: str = "") -> Feedback: ...

    async def unrate(self, user_id: str, conversation_id: str, index: int) -> bool:
        """Withdraw the user's vote on the turn; whether there was one."""
        ...


class TurnLog(Protocol):
    """Every user's turns over a time range, for the operator's report; never reachable by a user's request.

    Rules: the turns created in ``[since, until)`` oldest first (ties in any order), each with its owner, its
    conversation and its owner's vote; at most ``limit``. What was deleted, swept or erased is not there.
    """

    async def logged_turns(self, since: float, until: float, *, limit: int = 100_000) -> list[LoggedTurn]: ...


class AppendThroughExtend:
    """``append_turn`` as every backend writes it: one turn through ``extend``."""

    async def extend(
        self, user_id: str, conversation_id: str, turns: Sequence[NewTurn], *, start: ChainStart | None = None
    ) -> list[StoredTurn]:
        raise NotImplementedError

    async def append_turn(self, user_id: str, conversation_id: str, turn: NewTurn) -> StoredTurn:
        [stored] = await self.extend(user_id, conversation_id, [turn])
        return stored


async def all_conversations(store: ConversationStore, user_id: str, *, page: int = 100) -> list[Conversation]:
    """Every conversation of ``user_id``, paged through ``list`` (erase and export read them all)."""
    found: list[Conversation] = []
    while batch := await store.list(user_id, limit=page, offset=len(found)):
        found.extend(batch)
    return found


class HistoryStore(ConversationStore, SummaryStore, FeedbackStore, TurnLog, Protocol):
    """What every conversation backend is: the turns, the rolling summaries and the votes beside them, and the log
    of all turns an operator reads."""


@dataclass
class Session:
    """A user's server-side session: what the service holds between requests, independent of the token."""

    id: str
    user_id: str
    started_at: float
    last_seen: float


class SessionStore(Protocol):
    """Server-side sessions, one per user, ended by ``ttl_s`` seconds of inactivity or by logout.

    Rules: ``touch`` returns the user's live session with ``last_seen`` set to now, or starts a fresh one (a new id)
    when there is none or it has been idle for longer than ``ttl_s``; concurrent touches of one user, from any
    number of processes sharing the store, agree on one session. ``logout`` ends it and returns what it was.
    Nothing persisted belongs to a session, so expiry loses no conversation.
    """

    ttl_s: float

    async def touch(self, user_id: str) -> Session: ...

    async def logout(self, user_id: str) -> Session | None: ...

    async def aclose(self) -> None: ...


LockKey = tuple[str, str]  # (user_id, conversation_id)


class Lease(Protocol):
    """A held turn lock; release it exactly once, when the turn (or delete) is over."""

    async def release(self) -> None: ...


class TurnLock(Protocol):
    """Mutual exclusion per conversation, so its turns run one at a time and each sees the previous one.

    Rules: at most one lease per key is held at a time among all the processes sharing the lock; waiters in one
    process are served in arrival order; a waiter that is cancelled leaves no lease behind; a lease held by a
    process that died is freed by itself (a lease that expires unless renewed, or a session the server drops), so
    a crashed replica never blocks a conversation for good.
    """

    async def acquire(self, key: LockKey) -> Lease: ...

    def busy(self) -> set[LockKey]:
        """Keys this process holds or waits for (the history sweeper spares their conversations)."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredDocument:
    root: str
    source: str
    content_hash: str
    chunk_count: int
    ingested_at: float


class DocumentVersion(NamedTuple):
    """What :meth:`DocumentRegistry.replace_documents` stores for one ``(root, source)``."""

    root: str
    source: str
    content_hash: str
    chunks: Sequence[Chunk]
    vectors: np.ndarray


Ranking = list[tuple[int, float]]
"""(passage key, score) pairs, best first. Keys are the store's own integers, stable until the passage is replaced."""


def check_dimension(vectors: np.ndarray, dim: int) -> None:
    """Refuse vectors that cannot be compared with the stored ones (a :class:`PassageIndex` rule), saying what to do
    about it: the usual cause is an embedder changed after ingestion."""
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        got = vectors.shape[-1] if vectors.ndim else 0
        raise ConfigurationError(
            f"vectors with {got} dimensions cannot be compared with the stored {dim}-dimensional passage vectors",
            hint="the embedder changed since the documents were ingested: set ANAPHORA_EMBEDDER back, or re-embed "
            "with: anaphora ingest --rebuild PATH",
        )


def embedder_mismatch(built_with: str, embedder: str) -> ConfigurationError:
    """The refusal to search passages embedded by another embedder (or at another precision: the int8 MiniLM is
    named ``<name>-int8``), saying which setting brings the stored one back and how to re-embed instead."""
    base, _, precision = embedder.rpartition("-")
    stored_base, _, stored_precision = built_with.rpartition("-")
    if built_with == base and precision == "int8":
        setting = "set ANAPHORA_EMBEDDER_PRECISION=fp32 (the documents were embedded at fp32)"
    elif embedder == stored_base and stored_precision == "int8":
        setting = "set ANAPHORA_EMBEDDER_PRECISION=int8 (the documents were embedded at int8)"
    else:
        setting = "set ANAPHORA_EMBEDDER back"
    return ConfigurationError(
        f"the documents were embedded with {built_with!r} but the embedder is now {embedder!r}",
        hint=f"{setting}, or re-embed: anaphora ingest PATH re-embeds the stored passages (or use a new "
        "ANAPHORA_DATA_DIR)",
    )


class DocumentRegistry(Protocol):
    """The ingested documents, each with its passages and their vectors; what :class:`~anaphora.ingest.Ingestor`
    writes to.

    Rules: a document is ``(root, source)``; ``replace_document`` swaps a document and *all* its passages in one
    transaction (a reader sees the old set or the new one, never a mix, and a failure leaves the old set), and
    removing a document removes its passages. ``content_hash`` is stored as given, so the ingestor can skip
    unchanged files. Passage ids are unique across documents (``taken_chunk_ids`` lets the ingestor avoid clashes).
    """

    def documents(self) -> list[StoredDocument]: ...

    def replace_document(
        self,
        root: str,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        embedder: str,
    ) -> None: ...

    def replace_documents(self, documents: Sequence[DocumentVersion], embedder: str) -> None:
        """``replace_document`` for many documents in one transaction (ingestion writes a window at once): all of
        them or none. A passage id used by a document outside the batch raises
        :class:`~anaphora.errors.PassageIdTakenError` and stores nothing."""
        ...

    def remove_documents(self, documents: Iterable[tuple[str, str]]) -> int:
        """Remove these ``(root, source)`` documents with their passages; returns how many existed."""
        ...

    def remove_source(self, source: str) -> list[str]:
        """Remove every document named ``source`` (in any root) with its passages; returns their roots, sorted."""
        ...

    def taken_chunk_ids(self, ids: Sequence[str], root: str, source: str) -> set[str]:
        """Those of ``ids`` already used by passages of any document other than ``(root, source)``."""
        ...


class PassageIndex(Protocol):
    """What the hybrid retriever's first stage needs. Every search takes a batch (one turn's queries together) and
    returns one :data:`Ranking` per query, in query order, at most ``k`` long.

    Rules: dense scores are cosine similarities (vectors are L2-normalised), lexical scores are positive and
    larger is better; an empty query or one with no indexed word gets an empty ranking, never an error; a query
    vector whose dimension is not the index's is a :class:`~anaphora.errors.ConfigurationError` (the embedder
    changed) with a hint; the methods are synchronous and thread-safe (the retriever calls them from a worker
    thread, so blocking I/O never stalls the event loop).
    """

    def dense(self, vectors: np.ndarray, k: int) -> list[Ranking]: ...

    def close(self) -> None:
        """Release a connection pool (PostgreSQL); the embedded index holds none."""
        ...

    def term_statistics(self) -> TermStatistics | None:
        """Document frequencies of the lexical index's tokens, for choosing expansion terms; ``None`` when the
        backend has none to give cheaply (the expansion is then unfiltered)."""
        ...

    def lexical(self, queries: Sequence[str], k: int) -> list[Ranking]: ...

    def similarity(self, vectors: np.ndarray, keys: Sequence[Sequence[int]]) -> list[dict[int, float]]:
        """Cosine similarity of ``vectors[i]`` to each passage of ``keys[i]`` (unknown keys are left out)."""
        ...

    def passages(self, keys: Sequence[int]) -> dict[int, Chunk]:
        """The passages with these keys (unknown keys are left out)."""
        ...

    def neighbours(self, ids: Sequence[str], span: int) -> dict[str, list[Chunk]]:
        """For each passage id of ``ids``, the other passages of its document whose ordinal is within ``span`` of
        its own, in ordinal order (the page's text around it, which the first stage may not have returned). An id
        with none (alone in its document, or of no stored passage) is left out; ``span`` below 1 finds nothing.
        Read from the registry as it is now, like :meth:`passages` (a replaced document's new passages, never a
        removed one)."""
        ...

    def warm_up(self) -> None:
        """Load or connect now rather than on the first query, and make the registry's writes so far searchable
        (blocking the caller, never the searches: they keep using what was built before)."""
        ...
