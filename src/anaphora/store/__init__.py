"""Stores: the SQLite database and the stores built on it, the PostgreSQL conversation store and passage store
(pgvector), and the Redis conversation store and embedding cache, behind the Protocols in ``protocols``."""

from anaphora.store.conversations import SQLiteConversationStore
from anaphora.store.corpus import SQLiteCorpus
from anaphora.store.database import Database
from anaphora.store.embedding_cache import SQLiteEmbeddingCache
from anaphora.store.pg_passages import PostgresPassageStore
from anaphora.store.postgres import PostgresConversationStore
from anaphora.store.protocols import (
    Conversation,
    ConversationStore,
    DocumentRegistry,
    EmbeddingCache,
    PassageIndex,
    StoredDocument,
    StoredTurn,
    Summary,
    SummaryStore,
)
from anaphora.store.redis_store import RedisConversationStore, RedisEmbeddingCache

__all__ = [
    "Conversation",
    "ConversationStore",
    "Database",
    "DocumentRegistry",
    "EmbeddingCache",
    "PassageIndex",
    "PostgresConversationStore",
    "PostgresPassageStore",
    "RedisConversationStore",
    "RedisEmbeddingCache",
    "SQLiteConversationStore",
    "SQLiteCorpus",
    "SQLiteEmbeddingCache",
    "StoredDocument",
    "StoredTurn",
    "Summary",
    "SummaryStore",
]
