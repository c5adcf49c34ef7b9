"""Builds the generation prompt in the order that keeps provider and llama.cpp prefix caches warm:

system prompt (+ the user's profile) -> summary -> verbatim recent turns -> <<<CONTEXT>>> excerpts with ids
<<<END CONTEXT>>> -> <<<MEMORY>>> recalled memories with ids <<<END MEMORY>>> -> the question, last. What varies per
turn (excerpts, recalled memories) comes after what is stable across turns. With the ``cache_stable`` layout the
system message is the system prompt and profile alone (byte-identical until the profile changes) and the summary
opens the first verbatim user message (the first message of the conversation part, so chat templates that want
user/assistant alternation accept it); with ``sliding`` the summary ends the system message.
Everything untrusted passes through :func:`anaphora.sanitize.sanitize` here, at the one place prompts are made.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from anaphora.sanitize import sanitize
from anaphora.types import SHOWN_ABOVE, Message, Passage, PromptLayout

CONTEXT_OPEN = "<<<CONTEXT>>>"
CONTEXT_CLOSE = "<<<END CONTEXT>>>"
QUESTION_LABEL = "Question: "
SUMMARY_LABEL = "\n\nSummary of the earlier conversation: "  # "sliding": after the system prompt
SUMMARY_HEADING = "Summary of the earlier conversation: "  # "cache_stable": opens the conversation
SUMMARY_END = "\n\n"


def summary_label(layout: PromptLayout) -> str:
    """The fixed text a summary adds around itself in ``layout`` (for the token budget)."""
    return SUMMARY_LABEL if layout == "sliding" else SUMMARY_HEADING + SUMMARY_END


PROFILE_LABEL = "\n\nWhat you know about the user from earlier conversations: "
MEMORY_OPEN = "<<<MEMORY>>>"
MEMORY_CLOSE = "<<<END MEMORY>>>"
MEMORY_FRAMING = f"{MEMORY_OPEN}\n\n{MEMORY_CLOSE}\n\n"


# the fixed text a prompt with passages adds around them and the question (for the token budget)
CONTEXT_FRAMING = f"{CONTEXT_OPEN}\n\n{CONTEXT_CLOSE}\n\n{QUESTION_LABEL}"


def format_passage(passage: Passage) -> str:
    where = " — ".join(p for p in (passage.source, passage.heading) if p)
    label = f"[{sanitize(passage.id)}]" + (f" ({sanitize(where)})" if where else "")
    return f"{label}\n{sanitize(passage.text).strip()}"


def context_block(passages: Sequence[Passage], shown_earlier: Collection[str] = ()) -> str:
    """The excerpts in rank order; one an earlier turn of the prompt shows (id in ``shown_earlier``) is named there,
    not repeated."""
    parts = [f"[{sanitize(p.id)}] {SHOWN_ABOVE}" if p.id in shown_earlier else format_passage(p) for p in passages]
    body = "\n\n".join(parts) if parts else "(no excerpts found)"
    return f"{CONTEXT_OPEN}\n{body}\n{CONTEXT_CLOSE}"


def history_context(passages: Sequence[Passage], shown_earlier: Collection[str]) -> str:
    """What an earlier turn's excerpts add to its question when the turn is shown again (for the token budget)."""
    return f"{context_block(passages, shown_earlier)}\n\n{QUESTION_LABEL}"


def memory_block(memories: Sequence[Passage]) -> str:
    return f"{MEMORY_OPEN}\n" + "\n\n".join(format_passage(m) for m in memories) + f"\n{MEMORY_CLOSE}"


def system_text(system_prompt: str, profile: str = "") -> str:
    """The system prompt with the user's profile (stable across a user's turns, so it stays in the cached prefix)."""
    return system_prompt + (f"{PROFILE_LABEL}{sanitize(profile)}" if profile else "")


def build_messages(
    system_prompt: str,
    history: Sequence[Message],
    passages: Sequence[Passage] | None,
    question: str,
    summary: str = "",
    layout: PromptLayout = "cache_stable",
    memories: Sequence[Passage] = (),
    history_excerpts: Sequence[Sequence[Passage]] = (),
) -> list[Message]:
    """``passages=None`` means retrieval was not used for this turn: no context block at all. ``system_prompt`` is
    the whole system message (with the user's profile: :func:`system_text`); a running summary of older turns is
    placed as ``layout`` says (stable parts first); recalled memories (``memories``) go after the excerpts, just
    before the question. ``history_excerpts`` (per turn of ``history``, or none) are the passages each earlier
    turn showed: they are shown again with it, as it was asked, so the turn reads the same on every later turn and
    the prompt grows only at its end; a passage an earlier turn of the prompt shows is named by id, not repeated."""
    summary = sanitize(summary)
    system = system_prompt + (f"{SUMMARY_LABEL}{summary}" if summary and layout == "sliding" else "")
    messages = [Message(role="system", content=system)]
    excerpts = iter(history_excerpts)
    shown: set[str] = set()
    for message in (m for m in history if m.role != "system"):
        content = sanitize(message.content)
        turn_excerpts = next(excerpts, ()) if message.role == "user" else ()
        if turn_excerpts:
            content = history_context(turn_excerpts, shown) + content.strip()
            shown.update(p.id for p in turn_excerpts)
        messages.append(Message(role=message.role, content=content))
    final = sanitize(question).strip()
    if memories:
        final = f"{memory_block(memories)}\n\n{QUESTION_LABEL}{final}"
    if passages is not None:
        final = f"{context_block(passages, shown)}\n\n" + (final if memories else f"{QUESTION_LABEL}{final}")
    messages.append(Message(role="user", content=final))
    if summary and layout == "cache_stable":
        first = messages[1]  # the oldest verbatim user turn, or the question when no turn is verbatim
        messages[1] = Message(role=first.role, content=f"{SUMMARY_HEADING}{summary}{SUMMARY_END}{first.content}")
    return messages
