"""Counters and histograms of the turn pipeline, in a Prometheus registry owned by the engine (no global state).

The HTTP service exposes ``Metrics.registry`` at ``/metrics``; the CLI and evaluation read the same counters.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

STAGE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.rewriter = Counter(
            "anaphora_rewriter_requests",
            "Query-rewrite attempts by outcome",
            ["status"],
            registry=self.registry,
        )
        self.summarizer = Counter(
            "anaphora_summarizer_requests",
            "Rolling-summary updates by outcome",
            ["status"],
            registry=self.registry,
        )
        self.reranker = Counter(
            "anaphora_reranker_requests", "Rerank attempts by outcome", ["status"], registry=self.registry
        )
        # outcome counters a stage names in ``Stage.counter``
        self.requests = {"rewriter": self.rewriter, "summarizer": self.summarizer, "reranker": self.reranker}
        self.stage_runs = Counter(
            "anaphora_stage_runs", "Pipeline stage runs by outcome", ["stage", "status"], registry=self.registry
        )
        self.routes = Counter("anaphora_routes", "Turns by route kind", ["kind"], registry=self.registry)
        self.retrievals_skipped = Counter(
            "anaphora_retrievals_skipped", "Turns answered without retrieval", ["reason"], registry=self.registry
        )
        self.abstentions = Counter(
            "anaphora_abstentions", "Turns where no passage was relevant enough", registry=self.registry
        )
        self.answer_units = Counter(
            "anaphora_answer_units",
            "Units of generated answers by the support check's verdict, and whether they were kept",
            ["verdict", "kept"],
            registry=self.registry,
        )
        self._turn_series()

    def _turn_series(self) -> None:
        """The per-turn series: turns, model calls and their tokens, stage times, prompt size, the budget."""
        self.turns = Counter("anaphora_turns", "Turns answered", registry=self.registry)
        self.model_calls = Counter(
            "anaphora_model_calls", "Chat-model calls by purpose", ["purpose"], registry=self.registry
        )
        self.model_prompt_tokens = Counter(
            "anaphora_model_prompt_tokens",
            "Prompt tokens of chat-model calls by purpose: cached='true' served from a cache (llama.cpp KV reuse, a "
            "provider's prompt cache), cached='false' evaluated anew",
            ["purpose", "cached"],
            registry=self.registry,
        )
        self.stage_seconds = Histogram(
            "anaphora_stage_seconds",
            "Time per pipeline stage",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.prompt_tokens = Histogram(
            "anaphora_prompt_tokens",
            "Prompt tokens per turn",
            buckets=(256, 512, 1024, 2048, 4096, 6000, 8192, 16384, 32768),
            registry=self.registry,
        )
        self.budget_evictions = Counter(
            "anaphora_budget_evicted_turns",
            "Verbatim turns left out to fit the budget",
            registry=self.registry,
        )

    def counter(self, name: str, description: str) -> Counter:
        """The outcome counter ``anaphora_{name}_requests_total{status}`` for a stage's ``counter`` (made once)."""
        if name not in self.requests:
            self.requests[name] = Counter(f"anaphora_{name}_requests", description, ["status"], registry=self.registry)
        return self.requests[name]

    def value(self, name: str, **labels: str) -> float:
        """Current value of a sample, e.g. ``value("anaphora_rewriter_requests_total", status="ok")``."""
        return self.registry.get_sample_value(name, labels) or 0.0
