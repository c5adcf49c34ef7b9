"""Thin adapters that let LangChain and LlamaIndex run on anaphora's own chat model and first-stage retriever.

Everything here is glue for bench/peers/run.py; nothing changes what the libraries do:

- :class:`MeteredChatModel` wraps any anaphora ``ChatModel`` and counts every ``chat``/``stream`` call and the
  wall time spent inside it (the same instance serves anaphora, LangChain and LlamaIndex, so "model calls" and
  "model ms" are measured at one place for all three systems).
- :class:`MeteredRetriever` wraps ``HybridRetriever`` searches (``run`` and ``run_many``) likewise (calls, time,
  the queries it received).
- :class:`AnaphoraLangChainChatModel` is a LangChain ``BaseChatModel`` (``_generate`` / ``_agenerate``) calling
  the metered model; :class:`AnaphoraLangChainRetriever` a LangChain ``BaseRetriever`` returning the top
  passages as ``Document`` objects (passage id in ``metadata["id"]``).
- :class:`AnaphoraLlamaIndexLLM` is a LlamaIndex ``LLM`` for a *chat* backend: ``achat``/``chat`` call the metered
  model and ``acomplete``/``complete`` map a prompt to one user message, exactly what LlamaIndex's own
  chat-model integrations do (``achat_to_completion_decorator``); :class:`AnaphoraLlamaIndexRetriever` is a
  LlamaIndex ``BaseRetriever`` returning ``NodeWithScore`` (node id = passage id, also in ``metadata["id"]``).

Generation options: both peer adapters default to temperature 0 and a 256-token cap, the options anaphora's
rewriter uses, and pass through any ``temperature`` / ``max_tokens`` / ``stop`` the library sets on a call.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from anaphora.models.base import ChatModel, ChatOptions, ChatReply, ChatStream, Usage
from anaphora.retrieval import HybridRetriever
from anaphora.store.protocols import Ranking
from anaphora.types import Message, Passage

T = TypeVar("T")
PEER_DEPTH = 25  # passages each wrapped retriever returns (anaphora's `candidates` default)
DEFAULT_OPTIONS = ChatOptions(temperature=0.0, max_tokens=256)


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine from sync code: directly when no loop runs in this thread, else in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make())  # type: ignore[arg-type]
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


# --- metering ----------------------------------------------------------------------------------------------------


@dataclass
class CallLog:
    """What one wrapped component saw since the last :meth:`reset`."""

    calls: int = 0
    ms: float = 0.0
    inputs: list[Any] = field(default_factory=list)

    def reset(self) -> None:
        self.calls, self.ms, self.inputs = 0, 0.0, []


class MeteredChatModel:
    """An anaphora ``ChatModel`` proxy that counts calls and the time spent inside the wrapped model."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.name = model.name
        self.capabilities = model.capabilities  # what the wrapped model declares
        self.log = CallLog()
        self.total_calls = 0

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        self.log.calls += 1
        self.total_calls += 1
        self.log.inputs.append((tuple(messages), options))
        started = time.perf_counter()
        try:
            return await self.model.chat(messages, options)
        finally:
            self.log.ms += (time.perf_counter() - started) * 1000

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream:
        return ChatStream(lambda usage: self._stream(messages, options, usage))

    async def _stream(self, messages: Sequence[Message], options: ChatOptions, usage: Usage) -> AsyncIterator[str]:
        self.log.calls += 1
        self.total_calls += 1
        started = time.perf_counter()
        stream = self.model.stream(messages, options)
        try:
            async for piece in stream:
                yield piece
        finally:
            await stream.aclose()
            self.log.ms += (time.perf_counter() - started) * 1000
            usage.prompt_tokens, usage.cached_tokens = stream.usage.prompt_tokens, stream.usage.cached_tokens

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    async def aclose(self) -> None:
        await self.model.aclose()

    def warm_up(self) -> None:
        warm = getattr(self.model, "warm_up", None)
        if warm:
            warm()


class MeteredRetriever:
    """Wraps a ``HybridRetriever`` instance's batch search in place: ``run`` and ``run_many`` (and so the engine and
    the peers' adapters) all go through it. ``calls`` counts queries searched.

    The wrapped method is ``_search_with_dense``, the one place both paths embed and search: ``run_many`` (a
    follow-up's expansion + message) calls it directly, not through ``_search_all``, so metering ``_search_all``
    counted those turns' retrieval as framework time (p95 framework ~26 ms instead of ~2 ms)."""

    def __init__(self, retriever: HybridRetriever) -> None:
        self.retriever = retriever
        self.log = CallLog()
        original = retriever._search_with_dense

        async def search_with_dense(queries: list[str], limit: int) -> tuple[list[list[Passage]], list[Ranking]]:
            self.log.calls += len(queries)
            self.log.inputs.extend(queries)
            started = time.perf_counter()
            try:
                return await original(queries, limit)
            finally:
                self.log.ms += (time.perf_counter() - started) * 1000

        retriever._search_with_dense = search_with_dense  # type: ignore[method-assign]
        self.run = retriever.run


# --- LangChain ---------------------------------------------------------------------------------------------------


def _langchain_classes():
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict

    roles = {"human": "user", "ai": "assistant", "system": "system"}

    def to_ours(messages: list[BaseMessage]) -> list[Message]:
        return [Message(role=roles.get(m.type, "user"), content=m.text) for m in messages]

    class AnaphoraLangChainChatModel(BaseChatModel):
        """LangChain chat model backed by an anaphora ChatModel (temperature 0 unless the caller says otherwise)."""

        model_config = ConfigDict(arbitrary_types_allowed=True)
        backend: Any
        temperature: float = DEFAULT_OPTIONS.temperature
        max_tokens: int = DEFAULT_OPTIONS.max_tokens

        @property
        def _llm_type(self) -> str:
            return "anaphora"

        @property
        def _identifying_params(self) -> dict[str, Any]:
            return {"model": self.backend.name, "temperature": self.temperature, "max_tokens": self.max_tokens}

        def _options(self, stop: list[str] | None, kwargs: dict[str, Any]) -> ChatOptions:
            return ChatOptions(
                temperature=kwargs.get("temperature", self.temperature),
                max_tokens=kwargs.get("max_tokens", self.max_tokens),
                stop=tuple(stop or ()),
            )

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            reply = await self.backend.chat(to_ours(messages), self._options(stop, kwargs))
            usage = {
                "input_tokens": reply.prompt_tokens,
                "output_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            }
            message = AIMessage(content=reply.text, usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            return run_sync(lambda: self._agenerate(messages, stop, None, **kwargs))

    class AnaphoraLangChainRetriever(BaseRetriever):
        """LangChain retriever over anaphora's HybridRetriever (top ``k`` passages, id in metadata)."""

        model_config = ConfigDict(arbitrary_types_allowed=True)
        hybrid: Any
        k: int = PEER_DEPTH

        async def _aget_relevant_documents(
            self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
        ) -> list[Document]:
            passages = await self.hybrid.run(query, limit=self.k)
            return [
                Document(
                    page_content=p.text,
                    id=p.id,
                    metadata={"id": p.id, "score": p.score, "source": p.source, "heading": p.heading},
                )
                for p in passages
            ]

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return run_sync(lambda: self._aget_relevant_documents(query, run_manager=None))  # type: ignore[arg-type]

    return AnaphoraLangChainChatModel, AnaphoraLangChainRetriever


def langchain_adapters():
    """(AnaphoraLangChainChatModel, AnaphoraLangChainRetriever) classes; imported lazily."""
    return _langchain_classes()


# --- LlamaIndex --------------------------------------------------------------------------------------------------


def _llamaindex_classes():
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.llms.generic_utils import (
        achat_to_completion_decorator,
        astream_chat_to_completion_decorator,
    )
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        LLMMetadata,
        MessageRole,
    )
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.core.llms.llm import LLM
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from pydantic import ConfigDict, Field, PrivateAttr

    roles = {MessageRole.USER: "user", MessageRole.ASSISTANT: "assistant", MessageRole.SYSTEM: "system"}

    def to_ours(messages: Sequence[ChatMessage]) -> list[Message]:
        return [Message(role=roles.get(m.role, "user"), content=m.content or "") for m in messages]

    class AnaphoraLlamaIndexLLM(LLM):
        """LlamaIndex LLM for a chat backend: anaphora's ChatModel. Completions become one user message."""

        model_config = ConfigDict(arbitrary_types_allowed=True)
        temperature: float = Field(default=DEFAULT_OPTIONS.temperature)
        max_tokens: int = Field(default=DEFAULT_OPTIONS.max_tokens)
        context_window: int = Field(default=8192)
        _backend: Any = PrivateAttr()

        def __init__(self, backend: ChatModel, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._backend = backend

        @classmethod
        def class_name(cls) -> str:
            return "anaphora_llm"

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(
                context_window=self.context_window,
                num_output=self.max_tokens,
                is_chat_model=True,
                model_name=self._backend.name,
            )

        def _options(self, kwargs: dict[str, Any]) -> ChatOptions:
            stop = kwargs.get("stop") or ()
            return ChatOptions(
                temperature=kwargs.get("temperature", self.temperature),
                max_tokens=kwargs.get("max_tokens", self.max_tokens),
                stop=tuple([stop] if isinstance(stop, str) else stop),
            )

        async def _achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            reply = await self._backend.chat(to_ours(messages), self._options(kwargs))
            return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=reply.text), raw=None)

        async def _astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any):
            async def gen():
                text = ""
                async for delta in self._backend.stream(to_ours(messages), self._options(kwargs)):
                    text += delta
                    yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=delta)

            return gen()

        @llm_chat_callback()
        async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            return await self._achat(messages, **kwargs)

        @llm_completion_callback()
        async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return await achat_to_completion_decorator(self._achat)(prompt, **kwargs)

        @llm_chat_callback()
        async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any):
            return await self._astream_chat(messages, **kwargs)

        @llm_completion_callback()
        async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
            return await astream_chat_to_completion_decorator(self._astream_chat)(prompt, **kwargs)

        @llm_chat_callback()
        def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            return run_sync(lambda: self._achat(messages, **kwargs))

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return run_sync(lambda: achat_to_completion_decorator(self._achat)(prompt, **kwargs))

        def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any):
            yield self.chat(messages, **kwargs)

        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
            yield self.complete(prompt, formatted=formatted, **kwargs)

    class AnaphoraLlamaIndexRetriever(BaseRetriever):
        """LlamaIndex retriever over anaphora's HybridRetriever (top ``k`` passages; node id = passage id)."""

        def __init__(self, hybrid: Any, k: int = PEER_DEPTH, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._hybrid = hybrid
            self._k = k

        @staticmethod
        def _nodes(passages: list[Passage]) -> list[NodeWithScore]:
            return [
                NodeWithScore(
                    node=TextNode(
                        id_=p.id, text=p.text, metadata={"id": p.id, "source": p.source, "heading": p.heading}
                    ),
                    score=p.score,
                )
                for p in passages
            ]

        async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return self._nodes(await self._hybrid.run(query_bundle.query_str, limit=self._k))

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return run_sync(lambda: self._aretrieve(query_bundle))

    return AnaphoraLlamaIndexLLM, AnaphoraLlamaIndexRetriever


def llamaindex_adapters():
    """(AnaphoraLlamaIndexLLM, AnaphoraLlamaIndexRetriever) classes; imported lazily."""
    return _llamaindex_classes()
