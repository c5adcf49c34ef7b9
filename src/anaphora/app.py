"""Wiring: build the stores, models and pipeline from one Settings object; a thin sync wrapper on top."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from anaphora.answering.extractive import ExtractiveAnswerer, judged_texts
from anaphora.answering.select import PassageSelector
from anaphora.answering.sentence_vectors import SentenceVectors
from anaphora.answering.support import SupportChecker, Unit
from anaphora.embeddings import CachedEmbedder, cache_key, load_embedder
from anaphora.errors import ConfigurationError, InputError
from anaphora.ingest import Ingestor, IngestReport
from anaphora.ingest.ingestor import Progress
from anaphora.ingest.searchable import SearchableIngestor
from anaphora.ingest.sources import CitationLinks, Sources
from anaphora.ingest.sync import SiteReport, SiteSync
from anaphora.ingest.units import AnswerUnits, UnitsReport
from anaphora.memory import MemoryExport, MemoryKind, MemoryPage, MemoryStore
from anaphora.memory.forget import forget
from anaphora.memory.model_facts import ModelFactExtractor, Supports
from anaphora.memory.postgres_store import PostgresMemoryStore
from anaphora.memory.recall import MemoryRecall
from anaphora.memory.sqlite_store import SQLiteMemoryStore
from anaphora.memory.ttl import within_ttl
from anaphora.memory.writer import TurnRecorder
from anaphora.metrics import Metrics
from anaphora.model_defaults import (
    answer_mode,
    context_tokens,
    embeds_answer_units,
    query_rewriter,
    uses_model_facts,
    window_policy,
)
from anaphora.models import ChatModel, load_chat_model
from anaphora.pipeline.answer import Answer
from anaphora.pipeline.budget import PromptBudget, PromptLimits
from anaphora.pipeline.check import AnswerCheck
from anaphora.pipeline.engine import LOCAL_USER, Engine, TurnRequest, said_reader
from anaphora.pipeline.memory import (
    AcknowledgeStatement,
    PersonalQuery,
    ReadEraseEpoch,
    RecallMemory,
    RememberTurn,
)
from anaphora.pipeline.prompt import format_passage, history_context
from anaphora.pipeline.query import LastMessageQuery, QueryStage
from anaphora.pipeline.rewrite import JSON_ANALYSIS, TEXT_REWRITE, GuardedRewriter, HistoryExpansion
from anaphora.pipeline.stage import Stage
from anaphora.pipeline.stages import (
    AnswerFromConversation,
    BoostEntities,
    Budget,
    CheckCoverage,
    Cite,
    LinkCitations,
    QueryPlanner,
    Retrieve,
    Router,
    SaidReader,
    Select,
    SkipGate,
)
from anaphora.pipeline.summary import RollingSummarizer
from anaphora.report import Report, ReportOptions, build_report
from anaphora.rerank import load_reranker
from anaphora.retrieval import EmbeddedPassageIndex, HybridRetriever, IndexCache
from anaphora.retrieval.base import Retriever
from anaphora.retrieval.terms import TermStatistics
from anaphora.settings import ModelSettings, RetrievalSettings, Settings, StoreSettings, load_settings
from anaphora.store import (
    Conversation,
    Database,
    SQLiteConversationStore,
    SQLiteCorpus,
    SQLiteEmbeddingCache,
    StoredTurn,
    chains,
)
from anaphora.store.postgres_conversations import PostgresConversationStore
from anaphora.store.postgres_passages import PostgresPassageStore
from anaphora.store.protocols import (
    MAX_COMMENT_CHARS,
    DocumentRegistry,
    EmbeddingCache,
    Feedback,
    HistoryStore,
    PassageIndex,
    Vote,
    all_conversations,
)
from anaphora.store.redis_store import RedisConversationStore, RedisEmbeddingCache
from anaphora.store.sources import Source, SourceRegistry
from anaphora.store.sqlite_sources import SQLiteSources
from anaphora.telemetry import build_tracer
from anaphora.text_policy import require_valid_text
from anaphora.types import Citation, Message, TurnResult

T = TypeVar("T")
L = TypeVar("L", bound="Closable")
C = TypeVar("C", bound="AsyncClosable")


class Closable(Protocol):
    def close(self) -> None: ...


class AsyncClosable(Protocol):
    async def aclose(self) -> None: ...


@dataclass
class Closers:
    """Who closes what, registered by each builder as it opens something: ``clients`` first (drain the engine's
    background work, then close the network clients and pools, newest first), then ``local`` (the index files and
    the SQLite database, last)."""

    local: ExitStack = field(default_factory=ExitStack)
    clients: AsyncExitStack = field(default_factory=AsyncExitStack)

    def opened(self, resource: L) -> L:
        """``resource`` (a database, a cache, a passage store), closed with the local resources by its ``close``."""
        self.local.callback(resource.close)
        return resource

    def client(self, client: C) -> C:
        """``client`` (a store, a model, a reranker), closed by its ``aclose`` before the local resources."""
        self.clients.push_async_callback(client.aclose)
        return client

    async def aclose(self) -> None:
        await self.clients.aclose()
        self.local.close()


@dataclass
class Components:
    """Everything a running Anaphora holds; build it with :func:`build_components`, close it with :meth:`aclose`
    (or ``async with``), which runs the ``closers`` its builders registered."""

    settings: Settings
    database: Database
    corpus: DocumentRegistry
    passages: PassageIndex
    embedder: CachedEmbedder
    retriever: HybridRetriever
    conversations: HistoryStore
    chat_model: ChatModel
    engine: Engine
    ingestor: Ingestor
    memory: MemoryStore
    stage_parts: StageParts  # what the engine's stages were built from (evaluation builds its own list of them)
    closers: Closers = field(default_factory=Closers, repr=False)
    sentence_vectors: SentenceVectors | None = None  # the extractive answerer's memo (erase drops the user's)
    sources: SourceRegistry | None = None  # ingested folders and sites, their pages' URLs (docs/sites.md)
    answer_units: AnswerUnits | None = None  # embeds the passages' answer units after them (ingest/units.py)

    async def aclose(self) -> None:
        await self.closers.aclose()

    async def __aenter__(self) -> Components:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def build_query_stage(
    settings: RetrievalSettings, chat_model: ChatModel, statistics: Callable[[], TermStatistics | None] | None = None
) -> QueryStage:
    """``statistics``: what the history expansion reads to keep only words that disambiguate in this corpus (the
    passage index's document frequencies, read per turn so a re-ingested corpus counts at once)."""
    rewriter = query_rewriter(settings, chat_model.capabilities)
    if rewriter == "off":
        return LastMessageQuery()
    expansion = HistoryExpansion(statistics=statistics)
    if rewriter == "expansion":
        return expansion
    return GuardedRewriter(
        chat_model,
        history_turns=settings.rewrite_history_turns,
        max_tokens=settings.rewrite_max_tokens,
        style=JSON_ANALYSIS if rewriter == "analysis" else TEXT_REWRITE,
        fallback=expansion,
    )


_URL_EXAMPLES = {"redis": "redis://host:6379/0", "postgres": "postgresql://user:password@host:5432/anaphora"}


def server_url(stores: StoreSettings, setting: str, backend: str, fallback: str = "sqlite") -> str:
    """The ``redis_url`` or ``postgres_url`` that ``setting = backend`` needs, refused with a hint when unset."""
    url = (stores.redis_url if backend == "redis" else stores.postgres_url).get_secret_value()
    if not url:
        raise ConfigurationError(
            f"{setting} is '{backend}' but no {backend}_url is set",
            hint=f"set ANAPHORA_{backend.upper()}_URL={_URL_EXAMPLES[backend]}, or use {setting}='{fallback}'",
        )
    return url


def build_passage_stores(
    settings: Settings, database: Database, embedder: CachedEmbedder, closers: Closers
) -> tuple[DocumentRegistry, PassageIndex]:
    """The document registry and the passage index ``settings.stores.passage_store`` names: SQLite with the embedded
    indexes under ``data_dir``, or one PostgreSQL store (pgvector) that is both. Neither loads the embedder or
    connects here; that happens on first use."""
    if settings.stores.passage_store == "postgres":
        store = PostgresPassageStore(
            server_url(settings.stores, "passage_store", "postgres"),
            embedder_name=embedder.name,
            dim=lambda: embedder.dim,
            text_search_config=settings.stores.postgres_text_search_config,
            ef_search=settings.stores.postgres_hnsw_ef_search,
        )
        return store, closers.opened(store)  # its pool
    corpus = SQLiteCorpus(database)
    indexes = IndexCache(
        corpus,
        settings.data_dir / "index",
        embedder.name,
        lambda: embedder.dim,
        exact_below=settings.retrieval.dense_exact_below,
    )
    return corpus, closers.opened(EmbeddedPassageIndex(corpus, indexes))


def build_conversation_store(stores: StoreSettings, database: Database, closers: Closers) -> HistoryStore:
    """The conversation store ``stores.conversation_store`` names. The PostgreSQL and Redis ones connect lazily,
    on first use, so this stays synchronous; ``closers`` closes their clients."""
    if stores.conversation_store == "sqlite":
        return closers.client(SQLiteConversationStore(database))
    if stores.conversation_store == "redis":
        store: HistoryStore = RedisConversationStore(
            server_url(stores, "conversation_store", "redis"),
            ttl_s=stores.redis_ttl_s,
            key_prefix=stores.redis_key_prefix,
        )
        return closers.client(store)
    return closers.client(PostgresConversationStore(server_url(stores, "conversation_store", "postgres")))


def build_memory_store(stores: StoreSettings, database: Database, closers: Closers) -> MemoryStore:
    """The long-term memory store ``stores.effective_memory_store`` names: tables in the SQLite database, or
    PostgreSQL with pgvector (connects lazily, on first use)."""
    if stores.effective_memory_store == "postgres":
        store: MemoryStore = PostgresMemoryStore(
            server_url(stores, "memory_store", "postgres"),
            text_search_config=stores.postgres_text_search_config,
        )
        return closers.client(store)
    return closers.client(SQLiteMemoryStore(database))


def build_memory_stages(
    settings: Settings,
    memory: MemoryStore,
    embedder: CachedEmbedder,
    chat_model: ChatModel,
    statistics: Callable[[], TermStatistics | None] | None = None,
) -> tuple[RecallMemory | None, PersonalQuery | None, RememberTurn | None]:
    """The engine's long-term memory stages (none with ``memory = "off"``): recall, which sees no item past
    ``memory_ttl_days``, and the background writer (model facts too, with a capable ``chat_model``). The writer
    embeds with the uncached embedder: a turn's texts are embedded once, and vectors of them in the shared cache
    would be personal data that erase could not name. It reads the cache, though: the turn's messages are there
    already (retrieval embedded them, under keys erase names), so their vectors are not computed again."""
    if not settings.memory.enabled:
        return None, None, None
    reader = within_ttl(memory, settings.memory.memory_ttl_s)
    personal = PersonalQuery(reader, timeout_s=settings.memory.memory_recall_timeout_s, statistics=statistics)
    recall = RecallMemory(
        MemoryRecall(reader, embedder),
        reader,
        k=settings.memory.memory_recall_k,
        min_score=settings.memory.memory_min_score,
        timeout_s=settings.memory.memory_recall_timeout_s,
        fact_min_score=settings.memory.memory_fact_min_score,
        statistics=statistics,
    )
    capable = uses_model_facts(settings.memory, chat_model.capabilities)
    supports = fact_support(settings.answers.support_threshold)
    facts = ModelFactExtractor(chat_model, supports=supports) if capable else None
    recorder = TurnRecorder(memory, embedder.inner, facts, known=embedder)
    writer = RememberTurn(recorder, timeout_s=settings.memory.memory_write_timeout_s)
    return recall, personal if settings.memory.memory_personal_query else None, writer


def fact_support(threshold: float) -> Supports:
    """Whether the user's words hold a fact the model extracted: the answer check's rule at ``threshold`` (the
    share of the fact's content words found there; every risky token verbatim)."""

    def supports(claim: str, words: str) -> bool:
        checker = SupportChecker([], [words], threshold=threshold)
        return checker.check(Unit(claim, "", "sentence")).verdict == "supported"

    return supports


def build_embedding_cache(stores: StoreSettings, database: Database, closers: Closers) -> EmbeddingCache:
    """The embedding cache ``stores.embedding_cache_store`` names: SQLite in ``data_dir`` or Redis (shared)."""
    if stores.embedding_cache_store == "redis":
        cache: EmbeddingCache = RedisEmbeddingCache(
            server_url(stores, "embedding_cache_store", "redis"),
            ttl_s=stores.redis_ttl_s,
            key_prefix=stores.redis_key_prefix,
        )
        return closers.opened(cache)  # its client
    return closers.opened(SQLiteEmbeddingCache(database, max_entries=stores.embedding_cache_entries))


def build_embedder(settings: Settings, database: Database, closers: Closers) -> CachedEmbedder:
    """The embedder ``models.embedder`` names (:mod:`anaphora.backends`; loads on first use), over the cache."""
    return CachedEmbedder(load_embedder(settings), build_embedding_cache(settings.stores, database, closers))


def build_query_embedder(settings: Settings, embedder: CachedEmbedder) -> CachedEmbedder:
    """What embeds the search's queries: ``embedder`` itself, or, when it runs at int8 and
    ``embedder_query_precision`` is "fp32", the same model at fp32 over the same cache (asymmetric precision: the
    passages keep their int8 vectors, the query loses its quantization error). Loads nothing yet."""
    if settings.models.embedder_query_precision == "same":
        return embedder
    query = load_embedder(settings.with_updates(embedder_precision="fp32"))
    return embedder if query.name == embedder.name else CachedEmbedder(query, embedder.cache)


def build_chat_model(settings: ModelSettings, model: ChatModel | None, closers: Closers) -> ChatModel:
    """``model`` when given (a fake, a wrapper), else the one ``chat_model`` names; loads on first use."""
    return closers.client(model or load_chat_model(settings))


def build_selector(settings: Settings, closers: Closers) -> PassageSelector:
    """The second stage: the reranker ``models.reranker`` names, with the thresholds and the time budget."""
    return PassageSelector(
        closers.client(load_reranker(settings.models)),
        similarity_threshold=settings.retrieval.similarity_threshold,
        rerank_threshold=settings.retrieval.rerank_threshold,
        timeout_s=settings.models.rerank_timeout_s,
    )


def build_summarizer(settings: Settings, chat_model: ChatModel, conversations: HistoryStore) -> RollingSummarizer:
    return RollingSummarizer(
        chat_model,
        conversations,
        conversations,
        max_tokens=settings.prompt.summary_max_tokens,
        timeout_s=settings.prompt.summary_timeout_s,
        input_tokens=max(
            256, context_tokens(settings.models, chat_model.capabilities) // 2 - settings.prompt.summary_max_tokens
        ),
    )


def build_engine(settings: Settings, parts: StageParts, conversations: HistoryStore, closers: Closers) -> Engine:
    """The engine over the stages of ``parts``; its background work drains first when the closers run (it still
    uses the clients)."""
    engine = Engine(
        build_stages(settings, parts),
        conversations=conversations,
        window=window_policy(settings.prompt, parts.chat_model.capabilities),
        summaries=conversations,
        summarizer=build_summarizer(settings, parts.chat_model, conversations),
        memory_writer=parts.memory_writer,
        metrics=Metrics(),
        tracer=build_tracer(settings.telemetry),
    )
    closers.clients.push_async_callback(engine.drain)
    return engine


@dataclass(frozen=True)
class StageParts:
    """What the stages run on (built by :func:`build_components`, or by hand to compose stages of one's own)."""

    chat_model: ChatModel
    retriever: Retriever
    query_stage: QueryStage
    selector: PassageSelector
    extractive: ExtractiveAnswerer | None = None
    term_statistics: Callable[[], TermStatistics | None] | None = None  # what the entity boost and coverage read
    memory_recall: RecallMemory | None = None
    memory_writer: RememberTurn | None = None  # its erase epoch is read first; statements are acknowledged as kept
    personal_query: PersonalQuery | None = None  # the user's stated facts join the retrieval query
    links: Callable[[Sequence[Citation]], list[Citation]] | None = None  # citations' published URLs
    read_back: SaidReader | None = None  # a turn about the conversation reads it beyond the prompt's window


def build_stages(settings: Settings, parts: StageParts) -> list[Stage]:
    """The turn's stages in their three phases: retrieval (memory epoch, route, acknowledge, query, skip gate,
    retrieve, entity boost, select, coverage, memory), prompt (budget), answer (converse, answer, cite). The one
    place the pipeline is composed; what depends on the chat model is read from its declared capabilities
    (:mod:`anaphora.model_defaults`). Acknowledge and converse decide some answers before the answer stage, which
    then leaves them as they are."""
    capabilities = parts.chat_model.capabilities
    mode = answer_mode(settings.answers, capabilities)
    statistics, writer = parts.term_statistics, parts.memory_writer
    boost = bool(statistics and settings.retrieval.entity_boost)
    covers = statistics is not None and settings.retrieval.uncovered_similarity > 0
    converse = mode == "extractive" and parts.extractive is not None  # turns about the conversation, no model call
    answer = Answer(
        parts.chat_model,
        mode=mode,
        check=AnswerCheck(settings.answers.answer_check, mode, settings.answers.support_threshold, parts.extractive),
        extractive=parts.extractive,
        system_prompt=settings.prompt.system_prompt,
        layout=settings.prompt.prompt_layout,
        max_tokens=settings.answers.answer_max_tokens,
        temperature=settings.answers.answer_temperature,
    )
    return [
        *([ReadEraseEpoch(writer)] if writer is not None else []),
        Router(skip_gate=settings.retrieval.skip_gate),
        AcknowledgeStatement(remembers=writer is not None),
        QueryPlanner(parts.query_stage, timeout_s=settings.retrieval.rewrite_timeout_s),
        *([SkipGate()] if settings.retrieval.skip_gate else []),
        *([parts.personal_query] if parts.personal_query is not None else []),
        Retrieve(parts.retriever),
        *([BoostEntities(statistics, settings.retrieval.entity_boost)] if boost else []),  # type: ignore[arg-type]
        Select(parts.selector, top_k=settings.retrieval.top_k),
        *([CheckCoverage(statistics, settings.retrieval.uncovered_similarity)] if covers else []),  # type: ignore[arg-type]
        *([parts.memory_recall] if parts.memory_recall is not None else []),
        Budget(
            PromptBudget(parts.chat_model.count_tokens, format_passage, history_context),
            PromptLimits(
                budget=context_tokens(settings.models, capabilities) - settings.answers.answer_max_tokens,
                history_budget=settings.prompt.history_budget_tokens,
                memory_budget=settings.memory.memory_max_tokens,
                answer_reserve=settings.answers.answer_max_tokens,
            ),
            window_policy(settings.prompt, capabilities),
            settings.prompt.system_prompt,
        ),
        *([AnswerFromConversation(parts.read_back)] if converse else []),
        answer,
        Cite(),
        *([LinkCitations(parts.links)] if parts.links else []),
    ]


def build_components(settings: Settings, *, model: ChatModel | None = None) -> Components:
    """Open the store under ``settings.data_dir`` and assemble the pipeline. Models load lazily."""
    closers = Closers()
    try:
        return _assemble(settings, closers.opened(Database(settings.data_dir / "anaphora.db")), model, closers)
    except BaseException:
        closers.local.close()  # a model or embedder that fails to load must not leave the store open
        raise


def answer_units_ahead(settings: Settings, chat_model: ChatModel) -> Callable[[str], list[str]] | None:
    """The units a quoted answer judges of a passage's text, when ingestion embeds them (answers are quoted:
    :func:`~anaphora.model_defaults.embeds_answer_units`): with the chunks on a PostgreSQL passage store, after them
    on the embedded one (:func:`build_answer_units`)."""
    mode = answer_mode(settings.answers, chat_model.capabilities)
    return judged_texts if embeds_answer_units(settings.ingest, mode) else None


def build_answer_units(
    settings: Settings, corpus: DocumentRegistry, embedder: CachedEmbedder, chat_model: ChatModel
) -> AnswerUnits | None:
    """The answer units embedded after the passages (:mod:`anaphora.ingest.units`), on the embedded store when
    ingestion embeds them; ``None`` otherwise (a PostgreSQL store embeds them with the chunks, as before)."""
    units = answer_units_ahead(settings, chat_model)
    if units is None or not isinstance(corpus, SQLiteCorpus):
        return None
    return AnswerUnits(corpus, embedder, units, lock_path=settings.data_dir / "answer-units.lock")


def limit_blas_threads(threads: int) -> None:
    """Cap the BLAS thread pool of this process (0: leave it). Process-wide, so it is a setting applied when the
    components are built, never an import side effect."""
    if threads > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads, user_api="blas")


def _assemble(settings: Settings, database: Database, model: ChatModel | None, closers: Closers) -> Components:
    limit_blas_threads(settings.models.blas_threads)
    embedder = build_embedder(settings, database, closers)
    corpus, passages = build_passage_stores(settings, database, embedder, closers)
    conversations = build_conversation_store(settings.stores, database, closers)
    memory = build_memory_store(settings.stores, database, closers)
    chat_model = build_chat_model(settings.models, model, closers)
    units = build_answer_units(settings, corpus, embedder, chat_model)
    recall, personal, writer = build_memory_stages(settings, memory, embedder, chat_model, passages.term_statistics)
    # memories' sentences: uncached (the shared cache is not the user's), memoised per user (sentence_vectors.py)
    vectors = SentenceVectors(embedder, embedder.inner)
    retriever = HybridRetriever(passages, build_query_embedder(settings, embedder), settings.retrieval)
    parts = StageParts(
        chat_model,
        retriever,
        build_query_stage(settings.retrieval, chat_model, passages.term_statistics),
        build_selector(settings, closers),
        extractive=ExtractiveAnswerer(
            embedder,
            min_relevance=settings.answers.extractive_min_relevance,
            vectors=vectors,
            neighbours=passages.neighbours,
            neighbour_span=settings.answers.extractive_neighbours,
        ),
        term_statistics=passages.term_statistics,
        memory_recall=recall,
        memory_writer=writer,
        personal_query=personal,
        links=CitationLinks(sources := SQLiteSources(database)),
        read_back=said_reader(conversations),
    )
    return Components(
        settings=settings,
        database=database,
        corpus=corpus,
        passages=passages,
        embedder=embedder,
        retriever=retriever,
        conversations=conversations,
        chat_model=chat_model,
        engine=build_engine(settings, parts, conversations, closers),
        ingestor=SearchableIngestor(
            corpus,
            embedder,
            settings.ingest,
            ahead=None if units is not None else answer_units_ahead(settings, chat_model),
            stored=corpus if isinstance(corpus, SQLiteCorpus | PostgresPassageStore) else None,
            index=passages,
        ),
        memory=memory,
        stage_parts=parts,
        closers=closers,
        sentence_vectors=vectors,
        sources=sources,
        answer_units=units,
    )


async def aclose_components(components: Components) -> None:
    """Finish the engine's background work and close the network clients (the memory and conversation stores',
    the model's, the reranker's), newest first."""
    await components.closers.clients.aclose()


def close_local(components: Components) -> None:
    """Close the local resources, last: a PostgreSQL passage store's pool, a Redis embedding cache's client and the
    SQLite database."""
    components.closers.local.close()


async def erase_memory(components: Components, user_id: str) -> dict[str, int]:
    """The user's long-term memory (items with their vectors, entities, profile) and this process's memo of their
    sentences' vectors (:mod:`anaphora.answering.sentence_vectors`); the store's counts."""
    erased = await components.memory.erase_user(user_id)
    if components.sentence_vectors is not None:
        components.sentence_vectors.forget_user(user_id)
    return erased


async def erase_user_data(components: Components, user_id: str) -> dict[str, int]:
    """Right to erase: the user's conversations, turns and summaries, the cached embeddings of their text (the
    questions and the queries made from them), and their long-term memory (items with their vectors, entities,
    profile, and this process's memo of their sentences' vectors). Returns what was removed, by kind."""
    store = components.conversations
    texts: set[str] = set()
    for conversation in await all_conversations(store, user_id):
        for turn in await store.turns(user_id, conversation.id):
            texts.add(turn.question)
            if turn.trace is not None:
                texts.update([turn.trace.question, turn.trace.query, *turn.trace.alternate_queries])
    keys = [cache_key(components.embedder.name, text) for text in texts if text]
    cached = components.embedder.cache.delete_many(keys)
    erased = {**await store.erase_user(user_id), "cached_embeddings": cached}
    memory = await erase_memory(components, user_id)
    return {
        **erased,
        "memories": memory["memories"],
        "memory_vectors": memory["vectors"],
        "entities": memory["entities"],
        "profiles": memory["profiles"],
    }


async def report_of(
    components: Components,
    since: float,
    until: float,
    options: ReportOptions = ReportOptions(),  # noqa: B008 - frozen
) -> Report:
    """The operator's report over ``[since, until)`` (:mod:`anaphora.report`), grouped with the deployment's own
    embedder (not through its cache: what the report embeds must not outlive a user's erasure), with every
    ingested document as a page that may never have been cited."""
    documents = await asyncio.to_thread(components.corpus.documents)
    pages = [d.source for d in documents]
    uncached = components.embedder.inner  # the report's vectors are thrown away: none goes to the cache
    return await build_report(components.conversations, uncached, pages, since, until, options)


def ingest_with_workers(components: Components, workers: int, paths: Sequence[str | Path], **options) -> IngestReport:
    """Ingest with the embedding spread over ``workers`` processes (each its own embedder and threads), for
    machines with more cores than one embedder keeps busy; parsing, the embedding cache and the writes stay here."""
    from anaphora.embeddings.pool import ProcessPoolEmbedder

    cached = components.embedder
    with ProcessPoolEmbedder(components.settings, workers, cached.inner) as pool:
        embedder = CachedEmbedder(pool, cached.cache)
        ingestor = SearchableIngestor(
            components.corpus,
            embedder,
            components.settings.ingest,
            components.ingestor.ahead,
            stored=components.ingestor.stored,
            index=components.passages,
        )
        return ingestor.run(paths, **options)


def sources_of(components: Components) -> Sources:
    """The source service over ``components`` (its registry is the SQLite database's ``sources`` tables)."""
    registry = components.sources or SQLiteSources(components.database)
    return Sources(SiteSync(components.ingestor, components.corpus, registry, components.settings.sites))


class Anaphora:
    """Synchronous facade over the async engine, for scripts and notebooks.

    >>> rag = Anaphora(data_dir="/tmp/kb", chat_model="fake", embedder="hashing")
    >>> rag.ingest(["docs/"])                                   # doctest: +SKIP
    >>> conversation = rag.new_conversation()                   # doctest: +SKIP
    >>> rag.ask("How do I install it?", conversation).answer   # doctest: +SKIP
    """

    def __init__(self, settings: Settings | None = None, *, model: ChatModel | None = None, **overrides) -> None:
        """``model`` injects a chat-model instance (e.g. a FakeChatModel); ``overrides`` are Settings fields."""
        self.settings = settings or load_settings(**overrides)
        self.components = build_components(self.settings, model=model)
        self._runner = asyncio.Runner()

    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        prune: bool = True,
        force: bool = False,
        progress: Progress | None = None,
        reading: Progress | None = None,
        workers: int = 1,
        notice: Callable[[str], None] | None = None,
        **published: Any,
    ) -> IngestReport:
        """``progress`` gets (chunks embedded, chunks to embed), ``reading`` (files read, files found so far),
        ``notice`` a line to show at once (an index re-embedded for another embedder);
        ``workers``: embedding processes (see :func:`ingest_with_workers`); 1 embeds in this process.
        ``published``: ``base_url``, where the folders are published (their citations then open the page at the
        heading), with ``generator`` and ``directory_urls`` overriding what the tree says
        (:meth:`~anaphora.ingest.sources.Sources.record_folders`, :mod:`anaphora.ingest.urls`).

        The passages are searchable when this returns; their answer units are not embedded yet (see
        :meth:`embed_answer_units`): turns embed what they need until then."""
        options = {"prune": prune, "force": force, "progress": progress, "reading": reading, "notice": notice}
        if workers > 1:
            report = ingest_with_workers(self.components, workers, paths, **options)
        else:
            report = self.components.ingestor.run(paths, **options)
        self.sources.record_folders(paths, report, **published)
        return report

    def embed_answer_units(self, progress: Progress | None = None) -> UnitsReport | None:
        """Embed the stored passages' answer units that are not embedded yet (:mod:`anaphora.ingest.units`): the
        first answers quoting a passage then embed nothing. ``progress`` gets (passages done, passages). ``None``
        when this configuration embeds none ahead (answers are generated, or a PostgreSQL store embeds them with
        the passages)."""
        units = self.components.answer_units
        return units.run(progress) if units is not None else None

    @property
    def sources(self) -> Sources:
        """Folders and sites ingested: their published URLs, site crawls and re-syncs (docs/sites.md)."""
        return sources_of(self.components)

    def ingest_site(self, url: str, *, allow_mass_delete: bool = False, force: bool = False) -> SiteReport:
        """Crawl the documentation site at ``url`` (sitemap, robots.txt, main text) or re-sync it."""
        return self.sources.site(url, allow_mass_delete=allow_mass_delete, force=force)

    def sync(self, *, allow_mass_delete: bool = False) -> list[tuple[Source, IngestReport]]:
        """Every stored source brought up to date: folders ingested again, sites re-synced."""
        return self.sources.sync(lambda paths: self.ingest(paths), allow_mass_delete=allow_mass_delete)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of the async core (e.g. ``evaluation.replay(retrieval_half(rag.components), ...)``) on this
        facade's event loop."""
        return self._runner.run(coroutine)

    def new_conversation(self, title: str = "", user_id: str = LOCAL_USER) -> str:
        return self.run(self.components.conversations.create(user_id, title)).id

    def conversations(self, *, user_id: str = LOCAL_USER, limit: int = 50, offset: int = 0) -> list[Conversation]:
        return self.run(self.components.conversations.list(user_id, limit=limit, offset=offset))

    def turns(self, conversation_id: str, *, user_id: str = LOCAL_USER) -> list[StoredTurn]:
        return self.run(self.components.conversations.turns(user_id, conversation_id))

    def delete_conversation(self, conversation_id: str, *, user_id: str = LOCAL_USER) -> None:
        self.run(self.components.conversations.delete(user_id, conversation_id))

    def memories(
        self, *, user_id: str = LOCAL_USER, kind: MemoryKind | None = None, limit: int = 50, offset: int = 0
    ) -> MemoryPage:
        """The user's long-term memory items, newest first, with provenance; ``page.next_offset`` pages on."""
        return self.run(self.components.memory.list(user_id, kind=kind, limit=limit, offset=offset))

    def forget(self, memory_id: str, *, user_id: str = LOCAL_USER) -> list[str]:
        """Forget one memory item; a fact with the episode that stated it, and the profile rebuilt without it
        (:class:`~anaphora.errors.MemoryNotFoundError` if the user has none by that id). The ids forgotten."""
        return self.run(forget(self.components.memory, user_id, memory_id))

    def export_memory(self, *, user_id: str = LOCAL_USER) -> MemoryExport:
        """Everything remembered of the user: items, entities, profile (``export_lines`` makes JSON lines of it)."""
        return self.run(self.components.memory.export(user_id))

    def rate(
        self, conversation_id: str, index: int, vote: Vote, comment: str = "", *, user_id: str = LOCAL_USER
    ) -> Feedback:
        """Vote on the answer of turn ``index`` (0-based) of a conversation; a second vote replaces the first."""
        require_valid_text(comment, "the comment")
        if len(comment) > MAX_COMMENT_CHARS:
            raise InputError(
                f"the comment has {len(comment)} characters, more than the {MAX_COMMENT_CHARS} a vote keeps",
                hint="shorten it to a few sentences",
            )
        return self.run(self.components.conversations.rate(user_id, conversation_id, index, vote, comment))

    def unrate(self, conversation_id: str, index: int, *, user_id: str = LOCAL_USER) -> bool:
        """Withdraw the vote on a turn's answer; whether there was one."""
        return self.run(self.components.conversations.unrate(user_id, conversation_id, index))

    def report(self, since: float, until: float, options: ReportOptions = ReportOptions()) -> Report:  # noqa: B008
        """The operator's report over ``[since, until)``: every user's turns (:func:`report_of`)."""
        return self.run(report_of(self.components, since, until, options))

    def erase_user(self, user_id: str = LOCAL_USER) -> dict[str, int]:
        """Right to erase: every conversation, cached embedding of their text and memory of the user; the counts."""
        return self.run(erase_user_data(self.components, user_id))

    def chain(self, response_id: str, *, user_id: str = LOCAL_USER, last: int | None = None) -> list[StoredTurn]:
        """The turns of the chain a stored response ends (``resp_{conversation}_{index}``: see
        :func:`anaphora.turn_ids.response_id`), oldest first; with ``last``, only the latest ``last``."""
        return self.run(chains.chain(self.components.conversations, user_id, response_id, last=last))

    def branch(self, response_id: str, *, user_id: str = LOCAL_USER, title: str = "") -> str:
        """A new conversation holding the chain a stored response ends (the original keeps every turn); its id.
        ``ask(..., continue_from=response_id)`` branches too, storing the branch only with its answered turn."""
        return self.run(chains.branch(self.components.conversations, user_id, response_id, title=title)).id

    def _request(
        self,
        question: str,
        conversation_id: str | None,
        *,
        user_id: str,
        history: Sequence[Message] | None = None,
        memory: bool = True,
        continue_from: str | None = None,
    ) -> TurnRequest:
        require_valid_text(question, "the question")
        if continue_from is None:
            return TurnRequest(
                question, user_id=user_id, conversation_id=conversation_id, history=history, memory=memory
            )
        if conversation_id is not None or history is not None:
            raise InputError(
                "continue_from cannot be combined with a conversation or a history",
                hint="continue a response chain with continue_from, or a conversation with its id",
            )
        place = self.run(chains.place_turn(self.components.conversations, user_id, previous_response=continue_from))
        return TurnRequest(
            question, user_id=user_id, conversation_id=place.conversation_id, prelude=place.prelude, memory=memory
        )

    def ask(
        self,
        question: str,
        conversation_id: str | None = None,
        *,
        user_id: str = LOCAL_USER,
        history: Sequence[Message] | None = None,
        memory: bool = True,
        continue_from: str | None = None,
    ) -> TurnResult:
        """``memory=False``: a temporary chat, that recalls no long-term memory and leaves none.
        ``continue_from``: a stored response's id, whose chain the turn continues: appended to its conversation
        when it is the chain's latest turn, else stored in a new conversation, a branch, with the chain up to it
        (written with the turn: a turn that fails leaves nothing)."""
        options = {"user_id": user_id, "history": history, "memory": memory, "continue_from": continue_from}
        return self.run(self.components.engine.ask(self._request(question, conversation_id, **options)))

    def stream(
        self,
        question: str,
        conversation_id: str | None = None,
        *,
        user_id: str = LOCAL_USER,
        memory: bool = True,
        continue_from: str | None = None,
    ) -> Iterator[str | TurnResult]:
        """Yield text deltas, then the final :class:`TurnResult`; ``memory`` and ``continue_from`` as in
        :meth:`ask`."""
        engine = self.components.engine
        options = {"user_id": user_id, "memory": memory, "continue_from": continue_from}
        request = self._request(question, conversation_id, **options)

        async def start():
            return engine.stream(request)

        turn = self._runner.run(start())
        iterator = aiter(turn)
        while True:
            try:
                yield self._runner.run(anext(iterator))
            except StopAsyncIteration:
                break
        yield self._runner.run(turn.result())

    def settle(self) -> None:
        """Wait for the background work of the turns so far (their memory writes and summary updates); a script
        that starts a new conversation right after one then recalls what the last turn taught."""
        self.run(self.components.engine.drain())

    def close(self) -> None:
        self._runner.run(self.components.aclose())
        self._runner.close()

    def __enter__(self) -> Anaphora:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
