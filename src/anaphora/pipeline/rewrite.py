"""History-aware query stages: the guarded model rewriter and the model-free history expansion it falls back to.

Both feed only the retriever. Turn 1 (no history) makes no model call at all.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, ValidationError

from anaphora.models.base import ChatModel, ChatOptions
from anaphora.pipeline.query import QueryPlan
from anaphora.reading.coverage import rare, unused_words, written_as_names
from anaphora.reading.intents import without_social
from anaphora.reading.message import read
from anaphora.reading.rewrite_guard import strip_preamble, validate_rewrite
from anaphora.reading.route import REFERRING, TurnKind
from anaphora.retrieval.terms import TermStatistics, disambiguating, naming, on_topic, on_topic_support
from anaphora.sanitize import speaker_line
from anaphora.text import STOPWORDS, content_set, content_union, english_stemmer, words
from anaphora.types import Message

log = logging.getLogger("anaphora.rewrite")

REWRITE_INSTRUCTIONS = (
    "Rewrite the user's last message as one standalone search query. Use the conversation only to replace "
    "pronouns and to add the topic the message leaves out. Do not answer it. Keep the user's language. "
    "If the message already stands alone, repeat it unchanged. Reply with the query only, on one line.\n\n"
    "Example:\nUser: Who wrote Dune?\nAssistant: Frank Herbert wrote Dune in 1965.\n"
    "Last message: When did he die?\nQuery: When did Frank Herbert, the author of Dune, die?"
)
_CLAUSE = re.compile(r"[,;]|\b(?:and|or|but)\b", re.IGNORECASE)
ANSWER_SNIPPET_WORDS = 60
QUESTION_SNIPPET_WORDS = 100


class HistoryExpansion:
    """Model-free history-aware query: a non-standalone message gets the words of the recent user turns that are
    specific in this corpus (most recent first, in the spirit of historical query expansion); a standalone one is
    the query, with that expansion only as an alternate (:meth:`topic_alternate`).

    ``statistics`` (the lexical index's document frequencies) decides which words disambiguate: generic domain
    vocabulary, words no passage uses and words that do not co-occur with the rest of the conversation's topic are
    left out (:mod:`anaphora.retrieval.terms`). Without statistics every salient word is a candidate."""

    calls_model = False

    def __init__(
        self, *, turns: int = 3, max_terms: int = 10, statistics: Callable[[], TermStatistics | None] | None = None
    ) -> None:
        self.turns = turns
        self.max_terms = max_terms
        self.statistics = statistics

    def candidates(self, question: str, history: Sequence[Message]) -> list[str]:
        """Salient words of the recent topical user turns, most recent turn first, without the message's own."""
        present = content_set(question)
        # the recent user turns of the topic the message is on (thanks and "say that again" carry none)
        recent = topic_turns(question, history)[-self.turns :]
        found = [
            (word.strip(".-"), key)
            for text in reversed(recent)
            for word in re.findall(r"[\w\-.]+", text)
            if (key := word.lower().strip(".-")) and key not in STOPWORDS and key not in REFERRING and len(key) >= 2
        ]
        # each word by the stem of its first content word (one stemmer call for all of them)
        firsts = [next((w for w in words(key) if w not in STOPWORDS), "") for _, key in found]
        stems = english_stemmer().stemWords(firsts)
        terms: list[str] = []
        seen: set[str] = set()
        for (word, key), first, stemmed in zip(found, firsts, stems, strict=True):
            stemmed = stemmed if first else key
            if stemmed in present or stemmed in seen:
                continue
            seen.add(stemmed)
            terms.append(word)
        return terms

    def stands_alone(self, question: str, history: Sequence[Message] = ()) -> bool:
        """The message leaves the conversation's topic, by what it says or what it names.

        A message that says it changes the topic ("unrelated: ...") stands alone; one that goes back to an earlier
        topic ("back to postgres: ...") or carries on ("and on ARM?") does not. Without corpus statistics: no
        pronoun, three content words. With them, a word that names a topic in this corpus (:func:`~anaphora.
        retrieval.terms.naming`) decides, and a pronoun in a later clause than such a word refers to it ("What is
        the Galileo system and why is it important?"; but "Is prod007x in it?" still points back). On a later
        turn (``history``) such a word must also be a *new subject*: named neither in the conversation nor in the
        passages its topic finds (:meth:`new_subjects`). A message that names no new subject keeps the topic, however
        complete it reads ("is there a timeout before a partial record is flushed?" after two turns on multiline
        parsing)."""
        reading = read(question)
        if reading.shifts_topic:
            return True
        if reading.continues or reading.returns_to_topic:
            return False
        statistics = self.statistics() if self.statistics else None
        clauses = [words(clause) for clause in _CLAUSE.split(without_social(question))]  # "ok" names nothing
        content = [(n, t) for n, clause in enumerate(clauses) for t in clause if t not in STOPWORDS]
        names = naming([t for _, t in content], statistics)  # one statistics lookup for the whole message
        named = {n for (n, _), name in zip(content, names, strict=True) if name}  # clauses that name a topic
        referring = [n for n, clause in enumerate(clauses) if any(t in REFERRING for t in clause)]
        if referring and not any(n < referring[0] for n in named):
            return False  # the pronoun points back: nothing named before it for it to refer to
        if not history or statistics is None:
            return reading.looks_standalone or bool(named)  # (with a pronoun, something is named before it)
        # the words that name a topic (before the pronoun, if there is one) must be new to the conversation
        last = referring[0] if referring else len(clauses)
        naming_words = [t for (n, t), name in zip(content, names, strict=True) if name and n < last]
        return bool(self.new_subjects(question, naming_words, history, statistics))

    def new_subjects(
        self, question: str, candidates: Sequence[str], history: Sequence[Message], statistics: TermStatistics
    ) -> list[str]:
        """The ``candidates`` (words of ``question`` that name a topic) the conversation has not named: in none of
        its messages, and in none of the passages that best match its topic's words (pseudo-relevance feedback, as
        :func:`~anaphora.retrieval.terms.on_topic`). "timeout" after multiline parsing is on the multiline pages;
        "TLS" is not."""
        said = content_union(m.content for m in history)
        # a word no passage uses names a subject only when it reads as a name ("Nomad", "KEDA", "splunk"): "ever"
        # or "get" in a follow-up is no new subject
        absent = set(unused_words(question, statistics))
        names = written_as_names(question)
        unseen = [
            w
            for w in dict.fromkeys(candidates)
            if not content_set(w) <= said and (w.lower() not in absent or w.lower() in names or rare(w.lower()))
        ]
        topic = disambiguating(self.candidates(question, history), statistics)[: self.max_terms]
        if not unseen or not topic:
            return unseen
        near = on_topic_support(topic, unseen, statistics)
        return [w for w in unseen if not near[w]]

    def expand(self, question: str, history: Sequence[Message], alone: bool | None = None) -> tuple[str, bool]:
        """The query and whether it was expanded; ``alone``: :meth:`stands_alone`'s verdict when the caller has
        it already (it reads the corpus statistics for every word)."""
        if not history or (self.stands_alone(question, history) if alone is None else alone):
            return question, False
        statistics = self.statistics() if self.statistics else None
        terms = on_topic(disambiguating(self.candidates(question, history), statistics)[: self.max_terms], statistics)
        if not terms:
            return question, False
        return f"{question} {' '.join(terms)}", True

    def plan(self, question: str, history: Sequence[Message], alone: bool | None = None, **fields) -> QueryPlan:
        """The expanded query, with the message itself as an alternate so its own ranking still counts; else (the
        message stands alone, or no earlier word is specific enough to add) the message, with the topic's words as
        an alternate (:meth:`topic_alternate`)."""
        if history and alone is None:
            alone = self.stands_alone(question, history)
        query, expanded = self.expand(question, history, alone)
        if expanded:
            return QueryPlan(query, "expansion", alternates=(question,), **fields)
        asked = topic_history(history)
        # a message that does not stand alone was just expanded with the same turns, and nothing was added
        topic = self._topic_expansion(question, asked) if alone or len(asked) < len(history) else None
        return QueryPlan(question, "question", alternates=(topic,) if topic else (), **fields)

    def topic_alternate(self, question: str, history: Sequence[Message]) -> str | None:
        """The message expanded with the words of what the user asked before on this topic, as a query that rides
        along with a message that stands alone. A message can look standalone and still carry the topic on
        ("what if the clients don't use TLS at all?" after asking about postgres routing); the fusion weighs the
        expansion by how clear its head is against the message's and never above it
        (:mod:`anaphora.retrieval.query_fusion`: it joins only where its head is much clearer), so a real new topic
        keeps the message's ranking. Statements of the user's setup are left out (they are no topic, and the personal
        stage adds what bears on the turn), but not the topic boundaries they announce.
        ``None`` on a first turn, an announced change of topic, or when nothing is left to add."""
        return self._topic_expansion(question, topic_history(history))

    def _topic_expansion(self, question: str, asked: Sequence[Message]) -> str | None:
        """:meth:`topic_alternate` of a history already without the user's setup statements (:func:`topic_history`)."""
        if not asked or read(question).shifts_topic:
            return None
        query, expanded = self.expand(question, asked, alone=False)
        return query if expanded else None

    def fallback_plan(self, question: str, history: Sequence[Message]) -> QueryPlan:
        return self.plan(question, history)

    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan:
        if not history:
            return QueryPlan(question, "question", "skipped", "turn 1: no history")
        plan = self.plan(question, history, status="ok")
        if plan.source == "expansion":
            detail = "expanded with earlier turns"
        else:
            detail = "stands alone" + ("; the topic's words ride along" if plan.alternates else "")
        return QueryPlan(plan.query, plan.source, "ok", detail, alternates=plan.alternates)


def topic_history(history: Sequence[Message]) -> list[Message]:
    """The history a topic alternate is expanded with: without the user's statements of their setup (they are no
    topic), but with those that announce a topic boundary."""
    return [m for m in history if m.role != "user" or topic_boundary(m.content) or not read(m.content).states_setup]


def topic_boundary(message: str) -> bool:
    """The message says the topic changes or goes back to an earlier one: a boundary :func:`topic_turns` needs,
    whatever else the message says ("switching topics, we run everything on ARM64 now")."""
    reading = read(message)
    return reading.shifts_topic or reading.returns_to_topic


def topic_turns(question: str, history: Sequence[Message]) -> list[str]:
    """The user's earlier messages on the topic ``question`` is about, oldest first, without chit-chat and requests
    about the conversation. A message that says it changes the topic ("unrelated: ...") starts a new one; one that
    goes back ("back to postgres for a sec: ...") resumes the earlier topic it shares most words with (the latest
    of equals; with no change announced before it, the turns it shares words with), and the turns after it carry
    that topic on, whether it is an earlier message or ``question`` itself. For ``question``: an announced change
    has no earlier turns, a return has its topic's."""
    topics: list[list[str]] = [[]]
    for message in history:
        text = message.content
        said = read(text) if message.role == "user" else None
        if said is None or said.chit_chat or said.about_conversation:
            continue
        if said.shifts_topic:
            topics.append([text])
        elif said.returns_to_topic:
            topics.append([*resumed_turns(text, topics[:-1], topics[-1]), text])
        else:
            topics[-1].append(text)
    asked = read(question)
    if asked.shifts_topic:
        return []
    if asked.returns_to_topic:
        return resumed_turns(question, topics[:-1], topics[-1])
    return topics[-1]


def resumed_turns(message: str, earlier: Sequence[list[str]], current: list[str]) -> list[str]:
    """The turns a "back to ..." message resumes: the earlier topic it shares most words with, or, when no change
    was announced before it (one topic so far), the turns of that topic it names."""
    return resumed(message, earlier) if earlier else naming_turns(message, current)


def naming_turns(message: str, turns: list[str]) -> list[str]:
    """The turns that share a content word with ``message`` (all of them when none does)."""
    wanted = content_set(message)
    return [t for t in turns if wanted & content_set(t)] or turns


def resumed(message: str, topics: Sequence[list[str]]) -> list[str]:
    """The earlier topic a message goes back to: the one whose turns share most content words with it."""
    wanted = content_set(message)
    overlap = [len(wanted & content_set(" ".join(turns))) for turns in topics]
    best = max(range(len(topics)), key=lambda n: (overlap[n], n))
    return list(topics[best])


ANALYSIS_INSTRUCTIONS = (
    "Analyse the user's last message in this conversation and reply with a JSON object with three keys:\n"
    '"kind": "follow_up" if it depends on earlier turns, "new_query" if it asks something new on its own, '
    '"chit_chat" for greetings or thanks, "meta" for requests about the conversation itself;\n'
    '"answered_by_conversation": true only if the earlier turns already contain the full answer;\n'
    '"query": the last message rewritten as one standalone search query in the user\'s language, resolving '
    "pronouns from the conversation; the message unchanged if it already stands alone. Do not answer it.\n\n"
    'Example: {"kind": "follow_up", "answered_by_conversation": false, '
    '"query": "When did Frank Herbert, the author of Dune, die?"}'
)


class TurnAnalysis(BaseModel):
    """The schema a structured analysis must match."""

    kind: Literal["follow_up", "new_query", "chit_chat", "meta"]
    answered_by_conversation: bool = False
    query: str


@dataclass(frozen=True, slots=True)
class PromptStyle:
    """How the rewriter asks: a plain one-line query, or a JSON analysis (kind + skip verdict + query in one call)."""

    instructions: str
    suffix: str
    structured: bool

    def parse(self, text: str) -> TurnAnalysis | str:
        """The analysis, or the reason it is unusable (a string)."""
        if not self.structured:
            return TurnAnalysis(kind="follow_up", query=strip_preamble(text))
        try:
            return TurnAnalysis.model_validate_json(text.strip())
        except ValidationError as exc:
            problem = exc.errors()[0]
            return f"unparsable analysis ({'.'.join(str(p) for p in problem['loc'])}: {problem['msg']})"


TEXT_REWRITE = PromptStyle(REWRITE_INSTRUCTIONS, "Query:", structured=False)
JSON_ANALYSIS = PromptStyle(ANALYSIS_INSTRUCTIONS, "JSON:", structured=True)


def format_history(history: Sequence[Message], turns: int) -> str:
    recent = list(history)[-2 * turns :]
    lines = []
    for message in recent:
        limit = ANSWER_SNIPPET_WORDS if message.role == "assistant" else QUESTION_SNIPPET_WORDS
        cut = message.content.split()
        text = " ".join(cut[:limit]) + (" ..." if len(cut) > limit else "")
        lines.append(speaker_line("User" if message.role == "user" else "Assistant", text))
    return "\n".join(lines)


class GuardedRewriter:
    """One model call turns the latest message into a standalone query; a guard validates it; a rejected rewrite
    falls back to :class:`HistoryExpansion` (and so do a model error and a timeout, in the query stage)."""

    calls_model = True

    def __init__(
        self,
        model: ChatModel,
        *,
        history_turns: int = 6,
        max_tokens: int = 256,
        fallback: HistoryExpansion | None = None,
        style: PromptStyle = TEXT_REWRITE,
    ) -> None:
        self.model = model
        self.history_turns = history_turns
        self.style = style
        self.options = ChatOptions(
            temperature=0.0,
            max_tokens=max_tokens,
            stop=() if style.structured else ("\n",),
            json_mode=style.structured,
            json_schema=TurnAnalysis.model_json_schema() if style.structured else None,
        )
        self.fallback = fallback or HistoryExpansion()

    def messages(self, question: str, history: Sequence[Message]) -> list[Message]:
        conversation = format_history(history, self.history_turns)
        return [
            Message(role="system", content=self.style.instructions),
            Message(role="user", content=f"{conversation}\nLast message: {question}\n{self.style.suffix}"),
        ]

    async def run(self, question: str, history: Sequence[Message]) -> QueryPlan:
        """Raises when the model fails; the query stage that runs it falls back (and times it out)."""
        if not history:
            return QueryPlan(question, "question", "skipped", "turn 1: no rewrite")
        alone = self.fallback.stands_alone(question, history)  # asked once: it reads the corpus statistics
        if alone and not self.style.structured:
            # the message is the query: a rewrite could only ride along, and the call costs a model round trip
            # (and, in llama.cpp, the answer prompt's cached prefix); the topic's words still ride along
            return self.fallback.plan(question, history, alone, status="ok", detail="stands alone: no rewrite needed")
        reply = await self.model.chat(self.messages(question, history), self.options)
        return replace(self._judge(question, history, reply.text, alone), usage=reply.usage)

    def _judge(self, question: str, history: Sequence[Message], text: str, alone: bool) -> QueryPlan:
        """The plan for the model's reply ``text``: the rewrite if the guard accepts it, else the fallback.
        ``alone``: whether the message stands alone."""
        analysis = self.style.parse(text)
        if isinstance(analysis, str):
            return self._fall_back(question, history, "rejected", analysis, text.strip(), alone)
        rewrite = strip_preamble(analysis.query)
        reasons = validate_rewrite(question, history, rewrite)
        kind = TurnKind(analysis.kind) if self.style.structured else None
        if reasons:
            plan = self._fall_back(question, history, "rejected", "; ".join(reasons), rewrite, alone)
            return replace(plan, proposed_kind=kind, answered_by_conversation=analysis.answered_by_conversation)
        log.info("rewrite accepted", extra={"original": question, "rewrite": rewrite})
        if alone:
            # a message that stands alone is the query; the rewrite only rides along, weighed against it by the
            # retriever (HybridRetriever.run_many), so it can never outweigh what the user typed; so does the
            # topic's model-free expansion
            topic = self.fallback.plan(question, history, alone).alternates
            return QueryPlan(
                question,
                "question",
                "ok",
                "accepted; the message stands alone and stays the query",
                1,
                tuple(dict.fromkeys(q for q in (rewrite, *topic) if q != question)),
                proposed_kind=kind,
                answered_by_conversation=analysis.answered_by_conversation,
            )
        # the model-free queries ride along and the expansion leads the fusion: a guard-accepted rewrite of a small
        # model is still a hypothesis, weighed by its own ranking's head (a clear rewrite reaches the lead's weight)
        fallback = self.fallback.plan(question, history, alone)
        alternates = tuple(q for q in fallback.queries if q != rewrite)
        return QueryPlan(
            rewrite,
            "rewrite",
            "ok",
            "accepted",
            1,
            alternates,
            proposed_kind=kind,
            answered_by_conversation=analysis.answered_by_conversation,
            lead=fallback.query if fallback.source == "expansion" else None,
        )

    def fallback_plan(self, question: str, history: Sequence[Message]) -> QueryPlan:
        """The model-free history expansion (what a model error or timeout degrades to)."""
        return self.fallback.plan(question, history)

    def _fall_back(
        self, question: str, history: Sequence[Message], status, reason: str, rewrite: str, alone: bool
    ) -> QueryPlan:
        plan = self.fallback.plan(question, history, alone, status=status, model_calls=1)
        log.info(
            "rewrite %s, falling back to %s",
            status,
            plan.source,
            extra={"original": question, "rewrite": rewrite, "verdict": reason, "fallback": plan.query},
        )
        detail = f"{reason}; fallback: {plan.source}" + (f" (model said: {rewrite[:120]!r})" if rewrite else "")
        return QueryPlan(plan.query, plan.source, status, detail, 1, plan.alternates)
