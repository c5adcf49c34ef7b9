"""Stores: the SQLite database and the stores built on it, the PostgreSQL conversation store and passage store
(pgvector), the Redis conversation store and embedding cache, behind the Protocols in ``protocols``; and what
replicas share besides history: sessions (Redis) and turn locks (in-process, Redis or PostgreSQL)."""

from anaphora.store.locks import LockBackend, ProcessTurnLock, SharedTurnLock
from anaphora.store.postgres_conversations import PostgresConversationStore
from anaphora.store.postgres_passages import PostgresPassageStore
from anaphora.store.protocols import (
    ChainStart,
    Conversation,
    ConversationStore,
    DocumentRegistry,
    EmbeddingCache,
    Lease,
    LockKey,
    NewTurn,
    PassageIndex,
    Session,
    SessionStore,
    StoredDocument,
    StoredTurn,
    Summary,
    SummaryStore,
    TurnLock,
    new_conversation_id,
)
from anaphora.store.redis_store import RedisConversationStore, RedisEmbeddingCache
from anaphora.store.sqlite_conversations import SQLiteConversationStore
from anaphora.store.sqlite_corpus import SQLiteCorpus
from anaphora.store.sqlite_database import Database
from anaphora.store.sqlite_embedding_cache import SQLiteEmbeddingCache

__all__ = [
    "ChainStart",
    "Conversation",
    "ConversationStore",
    "Database",
    "DocumentRegistry",
    "EmbeddingCache",
    "Lease",
    "LockBackend",
    "LockKey",
    "NewTurn",
    "PassageIndex",
    "PostgresConversationStore",
    "PostgresPassageStore",
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
    "new_conversation_id",
]
