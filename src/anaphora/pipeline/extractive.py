"""The query-focused extractive answerer: the shown passages' best sentences for this turn, quoted with their ids,
at no model cost.

Sentences (and whole code blocks) are scored by embedding similarity to the turn's *retrieval query* (the rewrite
or expansion, so "And on ARM?" pulls the ARM sentences) and to the question, plus lexical overlap with the query;
MMR keeps them from repeating each other. The most relevant one leads (what answers the question comes first, even
from a recalled memory, which is shown after the documents) and the others follow in their passages' order. A
sentence that asks a question (an FAQ heading, a question the user asked in an earlier conversation, recalled as a
memory) answers nothing and is never quoted; nor is one that introduces what follows it ("Run this command:").
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from anaphora.embeddings.base import Embedder
from anaphora.memory.personal import second_person
from anaphora.pipeline.state import TurnState
from anaphora.pipeline.support import split_units
from anaphora.text import content_set
from anaphora.types import Passage

MIN_WORDS = 4  # shorter sentences are headings or fragments, not answers
RANK_PENALTY = 0.02  # per passage rank: the selector's order is evidence too
BLOCKS = ("code", "row")  # quoted as they are, not as a quote's sentence
_DELIMITER_ROW = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A sentence or code block that could be quoted. ``rank``: its passage's place in its own list (documents by
    the selector, memories by recall: a memory shown after five documents is not their sixth best); ``order``: its
    passage's place among all those shown."""

    passage_id: str
    order: int
    rank: int
    position: int
    text: str
    kind: str


@dataclass(frozen=True, slots=True)
class Extract:
    passage_id: str
    text: str
    kind: str
    order: int  # its passage's place among those shown (documents, then memories)
    position: int
    relevance: float


@dataclass(frozen=True, slots=True)
class ExtractiveAnswer:
    text: str
    points: tuple[Extract, ...]


class ExtractiveAnswerer:
    def __init__(
        self,
        embedder: Embedder,
        *,
        max_points: int = 5,
        max_words: int = 120,
        min_relevance: float = 0.25,
        diversity: float = 0.3,
    ) -> None:
        """``max_words``: the answer's length budget (about a reference answer's: 100-110 words on both dev
        domains), filled with the best points, at most ``max_points``; ``min_relevance``: the similarity to the
        query a sentence needs to be quoted at all (below it for every sentence, the answer abstains);
        ``diversity``: MMR's weight on not repeating a chosen sentence."""
        self.embedder = embedder
        self.max_points = max_points
        self.max_words = max_words
        self.min_relevance = min_relevance
        self.diversity = diversity

    @staticmethod
    def candidates(passages: Sequence[Passage], memories: Sequence[Passage] = ()) -> list[Candidate]:
        """Every quotable unit of the documents, then of the memories."""
        found = []
        shown = [*enumerate(passages), *enumerate(memories)]
        for order, (rank, passage) in enumerate(shown):
            for position, text, kind in quotable_units(passage.text):
                found.append(Candidate(passage.id, order, rank, position, text, kind))
        return found

    async def answer_turn(self, state: TurnState) -> ExtractiveAnswer | None:
        """This turn's extract: from the passages selected and the memories recalled (what the prompt would show,
        not cut by its budget), for the retrieval query and the question. The user's facts that a question about
        the user asks for lead, said back to the user; the documents' best sentences follow."""
        documents = state.selected if state.retrieves else ()
        query = state.plan.query if state.plan and state.retrieves else state.question
        leading = state.leading_facts
        others = tuple(p for p in state.memory_passages if p not in leading)
        quoted = await self.answer(query, state.question, documents, others)
        return facts_first(leading, quoted)

    async def answer(
        self, query: str, question: str, passages: Sequence[Passage], memories: Sequence[Passage] = ()
    ) -> ExtractiveAnswer | None:
        """The quoted answer from the documents' and the memories' sentences, or ``None`` when no sentence is
        relevant enough."""
        found = self.candidates(passages, memories)
        if not found:
            return None
        texts = [c.text for c in found]
        queries = list(dict.fromkeys([query, question]))
        vectors = await asyncio.to_thread(self.embedder.embed, [*queries, *texts])
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
        asked, sentences = vectors[: len(queries)], vectors[len(queries) :]
        similarity = (sentences @ asked.T).mean(axis=1)
        wanted = content_set(query) | content_set(question)
        overlap = np.array([len(content_set(t) & wanted) / (len(wanted) or 1) for t in texts])
        ranks = np.array([c.rank for c in found])
        relevance = similarity + 0.2 * overlap - RANK_PENALTY * ranks
        lengths = [len(t.split()) for t in texts]
        chosen: list[int] = []
        left_out = np.zeros(len(texts), dtype=bool)  # too long for what is left of the budget
        while len(chosen) < self.max_points:
            redundancy = (sentences @ sentences[chosen].T).max(axis=1) if chosen else np.zeros(len(texts))
            score = (1 - self.diversity) * relevance - self.diversity * redundancy
            score[chosen] = -np.inf
            score[left_out] = -np.inf
            best = int(np.argmax(score))
            if not np.isfinite(score[best]) or similarity[best] < self.min_relevance:
                break
            if chosen and redundancy[best] > 0.9:
                break
            if chosen and sum(lengths[i] for i in chosen) + lengths[best] > self.max_words:
                left_out[best] = True
                continue
            chosen.append(best)
        if not chosen:
            return None
        lead, *rest = (
            Extract(
                found[i].passage_id,
                found[i].text,
                found[i].kind,
                found[i].order,
                found[i].position,
                float(relevance[i]),
            )
            for i in chosen
        )
        points = (lead, *sorted(rest, key=lambda e: (e.order, e.position)))
        return ExtractiveAnswer(format_points(points), points)


def facts_first(facts: Sequence[Passage], quoted: ExtractiveAnswer | None) -> ExtractiveAnswer | None:
    """The user's facts, one line each with its id ("You run Fluent Bit 2.1 on ARM64 nodes. [memory:..]"), before
    the quoted answer."""
    if not facts:
        return quoted
    lead = tuple(
        Extract(f.id, second_person(f.text).rstrip(".") + ".", "sentence", order, 0, 1.0)
        for order, f in enumerate(facts)
    )
    points = lead + (quoted.points if quoted is not None else ())
    text = "\n\n".join([*(f"{p.text} [{p.passage_id}]" for p in lead), *([quoted.text] if quoted else [])])
    return ExtractiveAnswer(text, points)


def quotable_units(text: str) -> list[tuple[int, str, str]]:
    """(position, text, kind) of the units of ``text`` that can be quoted on their own: code blocks, sentences and
    list items of at least :data:`MIN_WORDS` words that neither ask nor introduce, and table rows under their
    table's header (a row alone is a line of values without names)."""
    found = []
    header: list[str] = []  # the current table's header row and delimiter row, once both have been seen
    first_row: str | None = None  # a row that may be a table's header
    for position, unit in enumerate(split_units(text)):
        line = unit.text.strip()
        if unit.kind == "row":
            if header:
                found.append((position, "\n".join([*header, line]), "row"))
            elif first_row is not None and _DELIMITER_ROW.match(line):
                header = [first_row, line]
            else:
                first_row = line
            continue
        header, first_row = [], None
        if unit.kind == "code" or (len(line.split()) >= MIN_WORDS and not line.endswith(("?", ":"))):
            found.append((position, line, unit.kind))
    return found


def format_points(points: Sequence[Extract]) -> str:
    """A lead sentence, then the other points quoted, each with its passage id."""

    def cited(point: Extract) -> str:
        if point.kind == "row":  # after a table, the marker needs a blank line, or it would be read as a row
            return f"{point.text}\n\n[{point.passage_id}]"
        if point.kind == "code":
            return f"{point.text}\n[{point.passage_id}]"
        return f"{point.text} [{point.passage_id}]"

    lead, *rest = points
    lines = [cited(lead)]
    lines.extend(cited(p) if p.kind in BLOCKS else f"> {cited(p)}" for p in rest)
    return "\n\n".join(lines)
