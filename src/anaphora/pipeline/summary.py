"""The rolling summary: turns that left the verbatim window are condensed into a running summary.

The original turns stay in the store; each summary version is stored beside them. Updates run after the turn
is stored (they never delay an answer) and fail open: on any problem the previous summary stays current. An erase
wins over an update in flight: every store saves a summary only for a conversation that still exists and belongs
to the user, checked in the save's own transaction, so a summary written from turns read before an erase is
dropped with the conversation, never stored after it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from anaphora.answering.answer_guard import RepetitionGuard
from anaphora.errors import ConversationNotFoundError
from anaphora.models.base import ChatModel, ChatOptions
from anaphora.pipeline.budget import truncate_to_tokens
from anaphora.sanitize import sanitize, speaker_line
from anaphora.store.protocols import ConversationStore, StoredTurn, SummaryStore
from anaphora.types import Message, StageStatus

log = logging.getLogger("anaphora.summary")
PAGE = 64  # turns read for one update: more than any input_tokens batch holds

SUMMARY_INSTRUCTIONS = (
    "You keep a short running summary of a conversation between a user and an assistant about the user's "
    "documents. Update the summary with the new turns: keep the topics, names, versions, numbers and decisions; "
    "drop greetings and repetition. Write plain sentences, no lists, at most {words} words."
)


def summary_prompt(previous: str, turns: Sequence[StoredTurn], words: int) -> list[Message]:
    lines = [
        f"{speaker_line('User', sanitize(t.question))}\n{speaker_line('Assistant', sanitize(t.answer))}" for t in turns
    ]
    current = sanitize(previous) if previous else "(none yet)"
    return [
        Message(role="system", content=SUMMARY_INSTRUCTIONS.format(words=words)),
        Message(
            role="user",
            content=f"Summary so far: {current}\n\nNew turns:\n" + "\n".join(lines) + "\n\nUpdated summary:",
        ),
    ]


class RollingSummarizer:
    def __init__(
        self,
        model: ChatModel,
        conversations: ConversationStore,
        summaries: SummaryStore,
        *,
        max_tokens: int = 256,
        timeout_s: float = 60.0,
        input_tokens: int = 3000,
    ) -> None:
        """``input_tokens`` caps the turns put into one update, so the call fits the model's context;
        ``timeout_s`` is the update's time budget."""
        self.input_tokens = input_tokens
        self.model = model
        self.conversations = conversations
        self.summaries = summaries
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s

    async def update(self, user_id: str, conversation_id: str, covers: int) -> StageStatus:
        """Make the summary cover the oldest ``covers`` turns. Returns the status; raises on failure, which the
        engine's background runner catches and counts (the previous summary stays current)."""
        current = await self.summaries.summary(user_id, conversation_id)
        done = current.covers_turns if current else 0
        if covers <= done:
            return "skipped"
        # a page past what the summary covers, never the whole conversation (a branch of a long chain has thousands)
        turns = await self.conversations.turns(user_id, conversation_id, start=done, stop=min(covers, done + PAGE))
        fresh = self._batch(turns)
        if not fresh:
            return "skipped"
        covers = fresh[-1].index + 1  # a long backlog is caught up over several updates
        prompt = summary_prompt(current.text if current else "", fresh, words=int(self.max_tokens * 0.6))
        options = ChatOptions(temperature=0.0, max_tokens=self.max_tokens)
        reply = await self.model.chat(prompt, options)
        text = sanitize(reply.text).strip()
        cut = RepetitionGuard().check(text)
        text = truncate_to_tokens((cut if cut is not None else text).strip(), self.max_tokens, self.model.count_tokens)
        if not text:
            log.info("summary rejected: empty", extra={"conversation": conversation_id})
            return "rejected"
        try:
            await self.summaries.save_summary(user_id, conversation_id, covers, text)
        except ConversationNotFoundError:  # erased (or deleted) while the model wrote: the summary goes with it
            log.info("summary dropped: the conversation was erased", extra={"conversation": conversation_id})
            return "skipped"
        return "ok"

    def _batch(self, turns: list[StoredTurn]) -> list[StoredTurn]:
        """The oldest turns whose text fits ``input_tokens``; at least one (cut by the model if it must)."""
        batch: list[StoredTurn] = []
        used = 0
        for turn in turns:
            used += self.model.count_tokens(turn.question) + self.model.count_tokens(turn.answer) + 8
            if batch and used > self.input_tokens:
                break
            batch.append(turn)
        return batch
