"""Request and response bodies. Unknown request fields are ignored (OpenAI clients send extras); known ones are
typed strictly: a string where a boolean belongs is an error, not a guess."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    model_validator,
)

from anaphora.memory.portable import item_record
from anaphora.memory.types import MemoryItem
from anaphora.report.signals import Handoff, handoff
from anaphora.store.protocols import MAX_COMMENT_CHARS, Conversation, Feedback, StoredTurn
from anaphora.text_policy import describe_invalid
from anaphora.turn_ids import response_id
from anaphora.types import Citation, TurnTrace


def _encodable(text: str) -> str:
    problem = describe_invalid(text)
    if problem is not None:
        raise ValueError(problem)
    return text


# request text: a strict string without lone surrogates or NUL (anaphora.text_policy), refused with a 422; the
# schema says so about NUL (a JSON document cannot carry a lone surrogate but as an escape, which no schema forbids)
Text = Annotated[StrictStr, AfterValidator(_encodable), Field(json_schema_extra={"pattern": "^[^\\u0000]*$"})]

# OpenAI's metadata: at most 16 pairs, keys of at most 64 characters, values of at most 512; the text policy applies
# to the keys as to the values (a key is echoed in the reply, which cannot encode a lone surrogate)
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512
Metadata = Annotated[
    dict[
        Annotated[Text, Field(max_length=METADATA_KEY_CHARS)], Annotated[Text, Field(max_length=METADATA_VALUE_CHARS)]
    ],
    Field(max_length=METADATA_PAIRS),
]


def _whole(value: object) -> object:
    """JSON Schema's integer includes 2.0 (and 1e3): take a whole float as the integer it is; 2.5, "2" and true
    stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def whole_number(minimum: int, maximum: int | None = None) -> Any:
    """A strict integer within bounds that also takes a whole float, documented as JSON Schema's integer (pydantic
    would put its own ``ge``/``le`` words into the schema of a validated type)."""
    bounds = {"minimum": minimum} | ({} if maximum is None else {"maximum": maximum})
    return Annotated[
        StrictInt, BeforeValidator(_whole), Field(ge=minimum, le=maximum), WithJsonSchema({"type": "integer", **bounds})
    ]


class TextPart(BaseModel):
    type: Literal["text"]
    text: Text


# only an assistant message may leave out its content (or send null), as in OpenAI's API
_CONTENT_UNLESS_ASSISTANT = {
    "if": {"properties": {"role": {"const": "assistant"}}},
    "else": {"required": ["content"], "properties": {"content": {"not": {"type": "null"}}}},
}


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", json_schema_extra=_CONTENT_UNLESS_ASSISTANT)

    role: Literal["system", "developer", "user", "assistant"]
    content: Text | list[TextPart] | None = None

    @model_validator(mode="after")
    def _content_unless_assistant(self) -> ChatMessage:
        if self.content is None and self.role != "assistant":
            raise ValueError(f"a {self.role} message needs content (only an assistant message may leave it out)")
        return self

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class TurnOptions(BaseModel):
    """Anaphora's own options of one turn; in a chat-completions request they travel in the ``anaphora`` extension
    field (OpenAI clients: ``extra_body={"anaphora": {"memory": False}}``), as the answer's details do."""

    model_config = ConfigDict(extra="forbid")

    memory: StrictBool = Field(
        default=True,
        description="false: a temporary chat; this turn recalls no long-term memory and nothing of it is remembered",
    )


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completions request. ``temperature`` and ``max_tokens`` apply to the answer (``max_tokens``
    within the service's ``answer_max_tokens``); ``user`` is recorded nowhere (the token decides who the user is);
    ``anaphora`` carries Anaphora's own options (:class:`TurnOptions`)."""

    model_config = ConfigDict(extra="ignore")

    model: Text = Field(default="anaphora", max_length=256)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool = False
    temperature: StrictFloat | None = Field(default=None, ge=0, le=2)  # a strict float takes an integer too
    max_tokens: whole_number(1) | None = None  # type: ignore[valid-type]
    n: whole_number(1, 1) | None = None  # type: ignore[valid-type]
    user: Text | None = Field(default=None, max_length=256)
    anaphora: TurnOptions = Field(default_factory=TurnOptions)


class CreateConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: Text = Field(default="", max_length=200)


class RenameConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: Text = Field(min_length=1, max_length=200)


class PostMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: Text = Field(min_length=1)
    stream: StrictBool = False
    memory: StrictBool = Field(
        default=True,
        description="false: a temporary chat; this turn recalls no long-term memory and nothing of it is remembered "
        "(the turn itself is still stored in the conversation)",
    )


class ConversationOut(BaseModel):
    object: Literal["conversation"] = "conversation"
    id: str
    title: str
    created_at: float
    updated_at: float
    turn_count: int
    metadata: dict[str, str] = Field(
        default_factory=dict, description="OpenAI's field: echoed by the create call, not stored (always {} after)"
    )

    @classmethod
    def of(cls, conversation: Conversation) -> ConversationOut:
        return cls(
            id=conversation.id,
            title=conversation.title,
            created_at=conversation.created_at,
            updated_at=conversation.updated_at,
            turn_count=conversation.turn_count,
        )


class TurnOut(BaseModel):
    index: int
    question: str
    answer: str
    citations: list[Citation]
    trace: TurnTrace | None
    created_at: float
    feedback: Feedback | None = Field(default=None, description="your vote on this answer, if any")
    handoff: Handoff | None = Field(
        default=None, description="the operator's support link, with a refused or weakly supported answer"
    )

    @classmethod
    def of(cls, turn: StoredTurn, *, support_url: str = "") -> TurnOut:
        fields = turn.model_dump(include=set(cls.model_fields) - {"handoff"})
        return cls(**fields, handoff=handoff(turn.trace, support_url))


class ConversationDetail(ConversationOut):
    turns: list[TurnOut] = Field(description="a page of turns, oldest first: the latest ones unless before is given")
    has_more: bool = Field(default=False, description="earlier turns exist: read them with before=turns[0].index")


class ConversationList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ConversationOut]
    limit: int
    offset: int
    has_more: bool


class Deleted(BaseModel):
    id: str
    object: Literal["conversation.deleted"] = "conversation.deleted"
    deleted: bool = True


class Answer(BaseModel):
    """A turn appended to a conversation (``POST /v1/conversations/{id}/messages`` without streaming)."""

    object: Literal["conversation.turn"] = "conversation.turn"
    conversation_id: str
    turn_index: int
    question: str
    answer: str
    citations: list[Citation]
    trace: TurnTrace
    handoff: Handoff | None = Field(
        default=None, description="the operator's support link, with a refused or weakly supported answer"
    )


class FeedbackIn(BaseModel):
    """A vote on an answer; sending another replaces it."""

    model_config = ConfigDict(extra="forbid")

    vote: Literal["up", "down"]
    comment: Text = Field(
        default="", max_length=MAX_COMMENT_CHARS, description="what was wrong or right, in the reader's words"
    )


class FeedbackOut(BaseModel):
    object: Literal["feedback"] = "feedback"
    conversation_id: str
    turn_index: int
    response_id: str = Field(description="the same answer named as a Responses API response")
    vote: Literal["up", "down"]
    comment: str
    created_at: float = Field(description="when the vote was first cast")
    updated_at: float = Field(description="when it was last changed")

    @classmethod
    def of(cls, conversation_id: str, index: int, feedback: Feedback) -> FeedbackOut:
        return cls(
            conversation_id=conversation_id,
            turn_index=index,
            response_id=response_id(conversation_id, index),
            **feedback.model_dump(exclude={"user_id"}),
        )


class FeedbackDeleted(BaseModel):
    object: Literal["feedback.deleted"] = "feedback.deleted"
    conversation_id: str
    turn_index: int
    deleted: bool = Field(description="whether there was a vote to withdraw")


class Erased(BaseModel):
    user_id: str
    conversations: int
    turns: int
    summaries: int
    cached_embeddings: int
    memories: int
    memory_vectors: int
    entities: int
    profiles: int


class Provenance(BaseModel):
    """Where a memory came from: the conversation, the turn(s) (0-based indexes, as the conversation API's; for a
    fact: the turns it was extracted from), when the (last) one happened, and who said it (always the user:
    memory never keeps the assistant's answers)."""

    conversation_id: str
    turns: list[int]
    time: float
    said_by: Literal["user"] = "user"


class MemoryOut(BaseModel):
    object: Literal["memory"] = "memory"
    id: str
    kind: Literal["episode", "fact"]
    text: str
    provenance: Provenance
    source: str = Field(description="what wrote it: 'turn' (episodes), 'rules' or 'model' (facts)")
    subject: str | None = Field(default=None, description="facts: what the fact is about, e.g. 'user'")
    attribute: str | None = Field(default=None, description="facts: e.g. 'chart version'")
    value: str | None = Field(default=None, description="facts: e.g. '2.8.0'")
    valid_from: float | None = Field(default=None, description="facts: since when it holds")
    valid_to: float | None = Field(default=None, description="facts: when a newer fact superseded it (null: current)")
    current: bool | None = Field(default=None, description="facts: not superseded")

    @classmethod
    def of(cls, item: MemoryItem) -> MemoryOut:
        return cls(**item_record(item))


class MemoryList(BaseModel):
    object: Literal["list"] = "list"
    data: list[MemoryOut]
    limit: int
    offset: int
    has_more: bool


class MemoryDeleted(BaseModel):
    id: str
    object: Literal["memory.deleted"] = "memory.deleted"
    deleted: bool = True


class MemoriesErased(BaseModel):
    """``DELETE /v1/memories``: what was forgotten of the caller, by kind."""

    object: Literal["memory.erased"] = "memory.erased"
    memories: int
    vectors: int
    entities: int
    profiles: int


class IngestPath(BaseModel):
    """``POST /v1/documents`` with JSON: a file or folder on the server to ingest."""

    model_config = ConfigDict(extra="forbid")

    path: Text = Field(min_length=1, max_length=4096, description="a file or folder on the server, or a site's URL")
    base_url: str | None = Field(
        default=None, max_length=2048, description="where the folder is published: citations open the page"
    )
    generator: str | None = Field(default=None, max_length=32, description="the site generator (docs/sites.md)")


class Progress(BaseModel):
    done: int
    total: int


class Skipped(BaseModel):
    path: str
    reason: str


class Warned(BaseModel):
    path: str
    warning: str


class IngestReportOut(BaseModel):
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    removed: list[str]
    skipped: list[Skipped]
    warnings: list[Warned]
    chunks_written: int
    seconds: float


class JobStarted(BaseModel):
    object: Literal["ingest_job"] = "ingest_job"
    job_id: str
    status: Literal["queued", "running", "done", "failed"]


class JobOut(BaseModel):
    object: Literal["ingest_job"] = "ingest_job"
    id: str
    status: Literal["queued", "running", "done", "failed"]
    progress: Progress
    created_at: float
    finished_at: float | None
    error: str | None
    report: IngestReportOut | None


class DocumentOut(BaseModel):
    source: str
    chunks: int
    ingested_at: float


class DocumentList(BaseModel):
    object: Literal["list"] = "list"
    data: list[DocumentOut]


class DocumentDeleted(BaseModel):
    source: str
    object: Literal["document.deleted"] = "document.deleted"
    deleted: bool = True
    documents: int


class SessionOut(BaseModel):
    object: Literal["session"] = "session"
    id: str
    user_id: str
    started_at: float
    last_seen: float
    expires_at: float
    turns_in_flight: int
    admin: bool = Field(default=False, description="whether you may read the report and manage documents")
    support_url: str = Field(default="", description="the operator's 'contact support' link, if set")


class SessionEnded(BaseModel):
    object: Literal["session.ended"] = "session.ended"
    id: str | None
    ended: bool = True


class SourceOut(BaseModel):
    """An ingested folder or site: how it is published and what its last sync did (counts by outcome)."""

    model_config = ConfigDict(extra="ignore")

    id: int
    kind: Literal["folder", "site"]
    root: str
    base_url: str | None
    generator: str | None
    synced_at: float | None
    pages: int
    last_report: dict[str, Any]


class SourceList(BaseModel):
    object: Literal["list"] = "list"
    data: list[SourceOut]


class SourcePageOut(BaseModel):
    url: str
    source: str = Field(description="the indexed document's name ('' when the page is not indexed)")
    title: str
    outcome: str = Field(description="indexed, unchanged, skipped or kept (its indexed version kept)")
    reason: str
    lastmod: str | None
    checked_at: float


class SourcePageList(BaseModel):
    object: Literal["list"] = "list"
    source_id: int
    data: list[SourcePageOut]
