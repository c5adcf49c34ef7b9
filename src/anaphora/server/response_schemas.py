"""Request bodies of the Responses API and of conversation items, in OpenAI's shape.

Unlike the other bodies, a parameter this service does not know is refused (400, naming it) rather than ignored:
a client that asks for tools, reasoning or images must learn that it gets none. Item and part types are checked by
:func:`messages_of` for the same reason, so the refusal names the item instead of listing a union's branches.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictStr

from anaphora.errors import InputError
from anaphora.server.schemas import CreateConversation, Metadata, Text, TurnOptions, whole_number
from anaphora.types import Message, Role

TEXT_PARTS = ("input_text", "output_text", "text")
MAX_ITEMS = 20  # input items of a response, items added to a conversation at once
MAX_INSTRUCTIONS_CHARS = 16_000  # echoed, not used: the default max_message_chars
_HINTS = {
    "tools": "Anaphora answers from its own documents and calls no tools: leave `tools` out",
    "tool_choice": "Anaphora calls no tools: leave `tool_choice` out",
    "reasoning": "the answer model is the service's own and has no reasoning settings: leave `reasoning` out",
    "include": "the response always carries the citations (annotations) and the trace (`anaphora`): leave `include` "
    "out",
}


class ContentPart(BaseModel):
    """One part of a message's content; only text parts are accepted (:func:`messages_of` says so)."""

    model_config = ConfigDict(extra="allow")  # output_text parts echoed back carry annotations

    type: StrictStr
    text: Text | None = None


class InputItem(BaseModel):
    """An input item: a message (``type`` "message", or left out as in OpenAI's easy form)."""

    model_config = ConfigDict(extra="allow")  # items echoed back from an output carry id and status

    type: StrictStr = "message"
    role: StrictStr | None = None
    content: Text | list[ContentPart] | None = None


def _at_most_max_items(items: list[InputItem]) -> list[InputItem]:
    """The item cap as a check of the list (a length error inside the union would be reported as a wrong type)."""
    if len(items) > MAX_ITEMS:
        raise ValueError(f"should have at most {MAX_ITEMS} items, not {len(items)}")
    return items


InputItems = Annotated[
    list[InputItem],
    Field(min_length=1, json_schema_extra={"maxItems": MAX_ITEMS}),
    AfterValidator(_at_most_max_items),
]


class ConversationRef(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: Text = Field(min_length=1, max_length=256)


class CreateResponse(BaseModel):
    """``POST /v1/responses``. ``input`` is the question (a string), or items ending with the user's question (the
    earlier ones are history); ``previous_response_id`` or ``conversation`` (not both) says what came before;
    ``store: false`` is a temporary chat: nothing stored, nothing remembered. ``instructions`` and ``user`` are
    echoed, not used (the service's system prompt applies; the token decides who the user is), as system messages
    and ``user`` are on ``/v1/chat/completions``."""

    model_config = ConfigDict(extra="allow")  # collected and refused by name: see unsupported()

    model: Text = Field(default="anaphora", max_length=256)
    input: Annotated[Text, Field(min_length=1)] | InputItems
    instructions: Annotated[Text, Field(max_length=MAX_INSTRUCTIONS_CHARS)] | None = None
    previous_response_id: Text | None = Field(default=None, max_length=256)
    conversation: Text | ConversationRef | None = None
    store: StrictBool = True
    stream: StrictBool = False
    max_output_tokens: whole_number(1) | None = None  # type: ignore[valid-type]
    temperature: StrictFloat | None = Field(default=None, ge=0, le=2)  # a strict float takes an integer too
    metadata: Metadata | None = None
    user: Text | None = Field(default=None, max_length=256)
    anaphora: TurnOptions = Field(default_factory=TurnOptions)

    @property
    def conversation_id(self) -> str | None:
        if isinstance(self.conversation, ConversationRef):
            return self.conversation.id
        return self.conversation

    def unsupported(self) -> None:
        """Refuse the first parameter this service does not implement (a null one counts as left out)."""
        for name, value in (self.model_extra or {}).items():
            if value is not None:
                raise InputError(
                    f"the parameter {name!r} is not supported by /v1/responses",
                    hint=_HINTS.get(name, "leave it out; docs/server.md lists the parameters this service accepts"),
                    param=name,
                    code="unsupported_parameter",
                )
        if self.previous_response_id is not None and self.conversation is not None:
            raise InputError(
                "previous_response_id and conversation cannot be used together",
                hint="continue a chain with previous_response_id, or a server-held conversation with conversation",
                param="conversation",
                code="conflicting_parameters",
            )


class NewConversation(CreateConversation):
    """``POST /v1/conversations``: Anaphora's ``title``, and OpenAI's ``items`` (earlier turns, as for
    :class:`CreateItems`) and ``metadata`` (echoed in the reply, not stored)."""

    items: list[InputItem] = Field(default_factory=list, max_length=MAX_ITEMS)
    metadata: Metadata | None = None


class CreateItems(BaseModel):
    """``POST /v1/conversations/{id}/items``: turns to add as they happened elsewhere (user, then assistant)."""

    model_config = ConfigDict(extra="forbid")

    items: list[InputItem] = Field(min_length=1, max_length=MAX_ITEMS)


def _text(item: InputItem, where: str) -> str:
    if item.content is None:
        return ""
    if isinstance(item.content, str):
        return item.content
    pieces = []
    for number, part in enumerate(item.content):
        if part.type not in TEXT_PARTS:
            raise InputError(
                f"{where}.content[{number}] is an {part.type!r} part; only text parts are supported",
                hint="Anaphora answers text questions over its documents: send parts of type input_text",
                param=f"{where}.content[{number}].type",
                code="unsupported_value",
            )
        pieces.append(part.text or "")
    return "".join(pieces)


def messages_of(items: list[InputItem], where: str = "input") -> list[Message]:
    """The items as messages, system and developer ones included as system (the caller decides what they mean)."""
    messages = []
    for number, item in enumerate(items):
        place = f"{where}[{number}]"
        if item.type != "message":
            raise InputError(
                f"{place} is a {item.type!r} item; only messages are supported",
                hint="send messages ({'role': 'user', 'content': '...'}); Anaphora runs no tools",
                param=f"{place}.type",
                code="unsupported_value",
            )
        if item.role not in ("user", "assistant", "system", "developer"):
            raise InputError(
                f"{place} has the role {item.role!r}",
                hint="a message's role is user, assistant, system or developer",
                param=f"{place}.role",
                code="invalid_value",
            )
        role: Role = "system" if item.role == "developer" else item.role  # type: ignore[assignment]
        messages.append(Message(role=role, content=_text(item, place)))
    return messages


def pairs_of(messages: list[Message], where: str) -> list[tuple[str, str]]:
    """(question, answer) turns from messages that alternate user and assistant, as a conversation holds them."""
    kept = [m for m in messages if m.role in ("user", "assistant")]
    if len(kept) % 2 or any(m.role != ("user", "assistant")[n % 2] for n, m in enumerate(kept)):
        raise InputError(
            f"{where}: a conversation holds turns, each a user message followed by the assistant's answer",
            hint="send user and assistant messages in turn; to ask a question, POST /v1/responses with conversation",
            param=where,
            code="invalid_value",
        )
    return [(kept[n].content, kept[n + 1].content) for n in range(0, len(kept), 2)]


# What the routes answer, for the OpenAPI document (the routes build these shapes as dicts: anaphora.server.responses)


class FileCitation(BaseModel):
    type: Literal["file_citation"] = "file_citation"
    file_id: str = Field(description="the passage id")
    filename: str = Field(description="the passage's source document")
    index: int = Field(description="where the answer cites it (its end when the model named no id)")
    title: str = Field(description="the passage's heading")


class UrlCitation(BaseModel):
    type: Literal["url_citation"] = "url_citation"
    start_index: int = Field(description="where the answer cites it: the start of its [id] (the end: none named)")
    end_index: int
    url: str = Field(description="the published page at the cited heading (sources with a base URL, sites)")
    title: str = Field(description="the passage's heading")


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[FileCitation | UrlCitation]
    logprobs: list[Any]


class InputText(BaseModel):
    type: Literal["input_text"] = "input_text"
    text: str


class OutputMessage(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    status: Literal["in_progress", "completed"]
    content: list[OutputText]


class InputMessage(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["user"] = "user"
    status: Literal["completed"] = "completed"
    content: list[InputText]


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class ResponseOut(BaseModel):
    """A response in OpenAI's shape, with Anaphora's ``anaphora`` extension (citations, trace, turn)."""

    model_config = ConfigDict(extra="allow")  # OpenAI's fixed fields: tools [], tool_choice "none", ...

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["in_progress", "completed", "failed"]
    error: dict[str, str] | None
    model: str
    output: list[OutputMessage]
    output_text: str
    previous_response_id: str | None
    conversation: dict[str, str] | None
    store: bool
    instructions: str | None
    max_output_tokens: int | None
    metadata: dict[str, str]
    temperature: float | None
    user: str | None
    usage: ResponseUsage | None
    anaphora: dict[str, Any] | None = None


class ItemList(BaseModel):
    object: Literal["list"] = "list"
    data: list[InputMessage | OutputMessage]
    first_id: str | None
    last_id: str | None
    has_more: bool


class ResponseDeleted(BaseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: bool = True
