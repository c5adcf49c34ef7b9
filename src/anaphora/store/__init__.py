"""Stores: the SQLite database and the stores built on it, the PostgreSQL conversation store and the Redis
conversation store and embedding cache, behind the Protocols in ``protocols``; and what replicas share besides
history: sessions (Redis) and turn locks (in-process, Redis or PostgreSQL)."""

from anaphora.store.conversations import SQLiteConversationStore
from anaphora.store.corpus import SQLiteCorpus, StoredDocument
from anaphora.store.database import Database
from anaphora.store.embedding_cache import SQLiteEmbeddingCache
from anaphora.store.locks import LockBackend, ProcessTurnLock, SharedTurnLock
from anaphora.store.postgres import PostgresConversationStore
from anaphora.store.protocols import (
    Conversation,
    ConversationStore,
    EmbeddingCache,
    Lease,
    LockKey,
    Session,
    SessionStore,
    StoredTurn,
    Summary,
    SummaryStore,
    TurnLock,
)
from anaphora.store.redis_store import RedisConversationStore, RedisEmbeddingCache

__all__ = [
    "Conversation",
    "ConversationStore",
    "Database",
    "EmbeddingCache",
    "Lease",
    "LockBackend",
    "LockKey",
    "PostgresConversationStore",
    "ProcessTurnLock",
    "RedisConversationStore",
    "RedisEmbeddingCache",
    "SQLiteConversationStore",
    "SQLiteCorpus",
    "SQLiteEmbeddingCache",
    "Session",
    "SessionStore",
    "SharedTurnLock",
    "StoredDocument",
    "StoredTurn",
    "Summary",
    "SummaryStore",
    "TurnLock",
]
