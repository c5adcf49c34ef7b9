"""Value objects that cross module boundaries: messages, passages, traces, turn results."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant"]
StageStatus = Literal["ok", "rejected", "error", "timeout", "skipped"]
PromptLayout = Literal["cache_stable", "sliding"]
# in a prompt, a passage the conversation already showed is named by its id and this, not repeated (chat models
# read the prompt; the fake model finds the text where it was first shown)
SHOWN_ABOVE = "(shown above)"


class Message(BaseModel):
    role: Role
    content: str


class Chunk(BaseModel):
    """A passage of an ingested document, as stored and indexed."""

    id: str
    text: str
    source: str = ""
    heading: str = ""
    ordinal: int = 0


class Passage(BaseModel):
    """A retrieved chunk with the scores that placed it."""

    id: str
    text: str
    source: str = ""
    heading: str = ""
    score: float = 0.0
    bm25_score: float | None = None
    dense_score: float | None = None
    rerank_score: float | None = None


class Citation(BaseModel):
    id: str
    source: str = ""
    heading: str = ""
    url: str | None = Field(
        default=None,
        description="the published page at the cited heading, when the source has a base URL or is a crawled site",
    )
    how: Literal["cited", "attributed", "supported"] = Field(
        default="cited",
        description="'supported': the passage supports a unit of the answer (the support check); 'cited': the "
        "model wrote the id (the check off); 'attributed': matched by word overlap because the model cited nothing",
    )


class UnitVerdict(BaseModel):
    """The support check's verdict on one unit of an answer (a sentence, list item, code block or table row)."""

    text: str = Field(description="the unit as the answer shows it; empty for a unit the check left out")
    kind: Literal["sentence", "item", "code", "row"] = "sentence"
    verdict: Literal["supported", "unsupported", "filler"]
    precision: float = Field(description="share of the unit's content words found in its best source")
    passage_id: str | None = Field(default=None, description="the passage that supports it (None: the conversation)")
    reason: str = ""
    missing: list[str] = Field(default_factory=list, description="risky tokens found in no source")
    kept: bool = True


class StageRecord(BaseModel):
    name: str
    status: StageStatus = "ok"
    ms: float = 0.0
    detail: str = ""


class BudgetDecision(BaseModel):
    """How the token budget was spent on one prompt (all figures in tokens, or counts of turns/passages)."""

    budget: int
    used: int
    system: int
    summary: int
    question: int
    passages: int
    history: int
    passages_kept: int
    passages_dropped: int
    turns_available: int
    turns_kept: int
    turns_evicted_for_budget: int
    turns_beyond_window: int
    summary_truncated: bool = False
    layout: PromptLayout = "sliding"
    turns_folded: int = Field(
        default=0,
        description="turns that left the verbatim window at this turn, to be folded into the summary ('cache_stable' "
        "folds a block at once, then none for several turns; 'sliding' one turn per turn once the window is full)",
    )

    memory: int = 0
    memory_kept: int = 0
    passages_shown_earlier: int = Field(
        default=0,
        description="this turn's passages that a verbatim earlier turn of the prompt already shows ('cache_stable' "
        "keeps each turn's excerpts with it): named by id instead of repeated",
    )
    turns_to_fold_next: int = Field(
        default=0,
        description="'cache_stable': of the turns kept, how many the next turn will fold into the summary because "
        "its window will not fit the budget (the summary is updated for them now, so it is ready then)",
    )


class ModelCall(BaseModel):
    """One chat-model call of the turn: its purpose and the prompt tokens it evaluated or found in a cache."""

    purpose: str
    prompt_tokens: int = 0
    cached_tokens: int = Field(default=0, description="prompt tokens served from a cache (KV reuse, provider cache)")
    cache_write_tokens: int = Field(default=0, description="prompt tokens written to a provider's cache")
    completion_tokens: int = 0
    first_token_ms: float | None = Field(default=None, description="from the call to its first streamed delta")

    @property
    def evaluated_tokens(self) -> int:
        """Prompt tokens the model had to process anew."""
        return max(0, self.prompt_tokens - self.cached_tokens)


class RecalledMemory(BaseModel):
    """A long-term memory item the memory stage recalled for this turn, with its provenance and why it was
    recalled; ``injected`` says whether the prompt showed it (it passed the threshold and the budget)."""

    id: str
    kind: Literal["episode", "fact"]
    text: str
    conversation_id: str
    turns: list[int]
    time: float
    current: bool = True
    score: float
    similarity: float | None = None
    why: str = ""
    injected: bool = False
    leads: bool = Field(
        default=False, description="a current fact the question about the user asks for: the answer leads with it"
    )

    @property
    def passage_id(self) -> str:
        """How the prompt, the answer check and the citations name it, beside the document passages."""
        return f"memory:{self.id}"


class TurnTrace(BaseModel):
    """What happened in one turn: observable, serialisable, returned by the API and printed by --trace."""

    question: str
    query: str = ""
    query_source: str = "question"
    alternate_queries: list[str] = Field(default_factory=list)
    query_weights: dict[str, float] = Field(
        default_factory=dict,
        description="each query searched, with its weight in the fusion of their rankings (0: left out, e.g. a "
        "phrasing whose ranking was no clearer than the message's)",
    )
    route: str | None = None
    route_reason: str = ""
    retrieval_skipped: bool = False
    abstained: bool = False
    retrieved: list[Passage] = Field(default_factory=list)
    stages: list[StageRecord] = Field(default_factory=list)
    model_calls: int = 0
    calls: list[ModelCall] = Field(default_factory=list, description="the model calls, in order, with their usage")
    prompt_tokens: int = 0
    budget: BudgetDecision | None = None
    answer_source: str = Field(
        default="model",
        description="'model', 'extractive' (quoted from the passages), 'conversation' (chit-chat or a request "
        "about the conversation, answered from the history), 'abstain' or 'none'",
    )
    support: list[UnitVerdict] = Field(default_factory=list, description="the support check, unit by unit")
    memory: list[RecalledMemory] = Field(
        default_factory=list, description="long-term memory items recalled, best first, with why and provenance"
    )

    def stage(self, name: str) -> StageRecord | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def timings_ms(self) -> dict[str, float]:
        return {s.name: round(s.ms, 3) for s in self.stages}


class TurnResult(BaseModel):
    conversation_id: str
    turn_index: int
    question: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    trace: TurnTrace
