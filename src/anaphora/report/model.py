"""The report's shape: what an operator reads, as JSON (the API), CSV or text (the CLI)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from anaphora.report.signals import Gap


class Topic(BaseModel):
    """A group of near-duplicate searches, named by the search asked most in it."""

    topic: str = Field(description="the search asked most in the group (the resolved retrieval query)")
    turns: int = Field(description="turns that searched for it, follow-ups included")
    users: int
    follow_ups: int = Field(description="of those, turns whose own words were not the search (resolved from history)")
    refused: int = 0
    low_support: int = 0
    searches: list[str] = Field(default_factory=list, description="distinct searches in the group, most asked first")
    questions: list[str] = Field(default_factory=list, description="what readers typed, a few examples")


class GapTurn(BaseModel):
    """One refused or weakly supported turn."""

    conversation_id: str
    turn_index: int
    created_at: float
    question: str
    searched: str
    gap: Gap
    topic: str
    cited: list[str] = Field(default_factory=list, description="the pages the answer cited")


class DownVote(BaseModel):
    """A thumbs-down answer with the pages it cited."""

    conversation_id: str
    turn_index: int
    voted_at: float
    question: str
    searched: str
    comment: str
    answer: str
    cited: list[str]


class PageCount(BaseModel):
    source: str
    citations: int


class Shares(BaseModel):
    """Turns by kind, and each kind's share of all turns (0 when there were none)."""

    documentation: int = 0
    chit_chat: int = 0
    meta: int = 0
    statement: int = 0
    chit_chat_share: float = 0.0
    meta_share: float = 0.0


class Report(BaseModel):
    """What readers asked and did not get over ``[since, until)``."""

    object: str = "report"
    since: float
    until: float
    generated_at: float
    turns: int
    users: int
    conversations: int
    shares: Shares
    votes: dict[str, int] = Field(description="'up' and 'down' counts")
    grouping: str = Field(description="how near-duplicate searches were grouped")
    truncated: bool = Field(default=False, description="the range held more turns than were read")
    top_topics: list[Topic]
    gap_topics: list[Topic] = Field(description="topics with refused or weakly supported turns, most gaps first")
    gaps: list[GapTurn]
    thumbs_down: list[DownVote]
    pages_cited_most: list[PageCount]
    pages_never_cited: list[str]
