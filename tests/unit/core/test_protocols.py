"""Lifecycle lives in the Protocols: every shipped backend has the methods, so nothing probes with getattr."""

from __future__ import annotations

import inspect

import pytest

from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.models.base import ChatModel
from anaphora.models.fake import FakeChatModel
from anaphora.models.llamacpp import LlamaCppChatModel
from anaphora.models.openai_compat import OpenAICompatibleChatModel
from anaphora.rerank.base import NoModelReranker, Reranker
from anaphora.rerank.cross_encoder import CrossEncoderReranker
from anaphora.rerank.http import HTTPReranker
from anaphora.retrieval.embedded import EmbeddedPassageIndex
from anaphora.store.postgres_conversations import PostgresConversationStore
from anaphora.store.postgres_passages import PostgresPassageStore
from anaphora.store.redis_store import RedisConversationStore, RedisEmbeddingCache
from anaphora.store.sqlite_conversations import SQLiteConversationStore
from anaphora.store.sqlite_embedding_cache import SQLiteEmbeddingCache

pytestmark = pytest.mark.unit

LIFECYCLE = [
    *[(cls, ("aclose",)) for cls in (FakeChatModel, LlamaCppChatModel, OpenAICompatibleChatModel)],
    *[(cls, ("aclose",)) for cls in (NoModelReranker, CrossEncoderReranker, HTTPReranker)],
    *[
        (cls, ("open", "ping", "aclose"))
        for cls in (SQLiteConversationStore, PostgresConversationStore, RedisConversationStore, SQLiteMemoryStore)
    ],
    *[(cls, ("close",)) for cls in (SQLiteEmbeddingCache, RedisEmbeddingCache)],
    *[(cls, ("close",)) for cls in (EmbeddedPassageIndex, PostgresPassageStore)],
]


@pytest.mark.parametrize(("cls", "methods"), LIFECYCLE, ids=lambda x: getattr(x, "__name__", ""))
def test_every_backend_has_the_lifecycle_of_its_protocol(cls: type, methods: tuple[str, ...]) -> None:
    for method in methods:
        assert callable(getattr(cls, method, None)), f"{cls.__name__} lacks {method}"
        if method in ("open", "ping", "aclose"):
            assert inspect.iscoroutinefunction(getattr(cls, method)), f"{cls.__name__}.{method} must be async"


def test_the_runtime_checkable_protocols_hold() -> None:
    assert isinstance(FakeChatModel(), ChatModel)
    assert isinstance(NoModelReranker(), Reranker)
