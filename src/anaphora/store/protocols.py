"""Store interfaces. SQLite, PostgreSQL and (for conversations) Redis implement them; every backend must keep the
same rules, which the contract suites :mod:`anaphora.testing.store_contract` (conversations) and
:mod:`anaphora.testing.passage_contract` (document registry and passage index) check."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from anaphora.errors import ConfigurationError
from anaphora.types import Chunk, Citation, TurnTrace


class Conversation(BaseModel):
    id: str
    user_id: str
    title: str
    created_at: float
    updated_at: float
    turn_count: int = 0


class StoredTurn(BaseModel):
    index: int
    question: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    trace: TurnTrace | None = None
    created_at: float


class ConversationStore(Protocol):
    """Conversations and their turns, owned by a user.

    Rules: a turn (question + answer + citations + trace) is appended atomically or not at all; turn indexes are
    0, 1, 2, ... without gaps; every read and write is scoped to ``user_id`` and an id owned by another user is
    reported as missing (:class:`anaphora.errors.NotFoundError`), never revealed.
    """

    async def create(self, user_id: str, title: str = "") -> Conversation: ...

    async def get(self, user_id: str, conversation_id: str) -> Conversation: ...

    async def list(self, user_id: str, *, limit: int = 50, offset: int = 0) -> list[Conversation]: ...

    async def turns(self, user_id: str, conversation_id: str, *, last: int | None = None) -> list[StoredTurn]: ...

    async def append_turn(
        self,
        user_id: str,
        conversation_id: str,
        question: str,
        answer: str,
        citations: Sequence[Citation],
        trace: TurnTrace,
    ) -> StoredTurn: ...

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


class Summary(BaseModel):
    covers_turns: int
    text: str
    created_at: float


class SummaryStore(Protocol):
    """Rolling summaries of a conversation's older turns. Saving never touches the turns themselves; every
    version is kept and the one covering the most turns is current."""

    async def summary(self, user_id: str, conversation_id: str) -> Summary | None: ...

    async def save_summary(self, user_id: str, conversation_id: str, covers_turns: int, text: str) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredDocument:
    root: str
    source: str
    content_hash: str
    chunk_count: int
    ingested_at: float


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

    def lexical(self, queries: Sequence[str], k: int) -> list[Ranking]: ...

    def similarity(self, vectors: np.ndarray, keys: Sequence[Sequence[int]]) -> list[dict[int, float]]:
        """Cosine similarity of ``vectors[i]`` to each passage of ``keys[i]`` (unknown keys are left out)."""
        ...

    def passages(self, keys: Sequence[int]) -> dict[int, Chunk]:
        """The passages with these keys (unknown keys are left out)."""
        ...

    def warm_up(self) -> None:
        """Load or connect now rather than on the first query."""
        ...
