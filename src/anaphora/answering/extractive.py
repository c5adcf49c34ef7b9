"""The query-focused extractive answerer: the shown passages' best sentences for this turn, quoted with their ids,
at no model cost.

Sentences (and code blocks, by their opening lines) are scored by embedding similarity to the turn's *retrieval
query* (the rewrite or expansion, so "And on ARM?" pulls the ARM sentences) and to the question, plus lexical
overlap with the query, plus a little for quoting code (in a docs answer, what to type; twice for the block a
sentence introduces when the question asks how to do something); MMR keeps them from repeating each other. The most
relevant sentence leads (what answers the question comes first, even from a recalled memory, which is shown after
the documents); the points that support it come preferably from the same passage and page, and follow in their
passages' order. A sentence that introduces what follows it ("Run this command:", "Use the following settings") is
quoted together with the code block, list or table it introduces, and never alone; a quoted sentence of a short
paragraph comes with the whole paragraph; of a longer one, with the next sentence when that one names the setting or
command the first only talks about, and with the one before it when it holds under that one's condition or refers
back to it. A sentence that
asks a question (an FAQ heading, a question the user asked in an earlier conversation, recalled as a memory) answers
nothing and is never quoted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from anaphora.answering.select import release_notes
from anaphora.answering.sentence_vectors import SentenceVectors
from anaphora.answering.support import (
    DELIMITER_ROW,
    FENCE,
    Unit,
    introduces,
    normalise_token,
    refers_back,
    risky_tokens,
    split_units,
    without_item_mark,
)
from anaphora.embeddings.base import Embedder
from anaphora.reading.message import read
from anaphora.reading.personal import bears_on, facts_answer, said_to_user
from anaphora.text import content_set, content_union
from anaphora.types import Chunk, Passage

MIN_WORDS = 4  # shorter sentences are headings or fragments, not answers
RANK_PENALTY = 0.02  # per passage rank: the selector's order is evidence too
# what a docs answer is made of is what to type: a unit that quotes code (a `code span` or a block) is worth this much
# more relevance (realdocs-dev end to end, with the sentence continuation of in_context: 18 -> 21 of 69
# questions and follow-ups answered; 0.05 and 0.15 within a turn of 0.1). Plain text (no Markdown code) gets none.
CODE_BONUS = 0.1
REPEATED_WORDS = 0.7  # the share of a point's words already quoted that makes it a repeat (as personal.REPEATS)
SAME_PASSAGE = 0.08  # a supporting point from the lead's passage is worth this much more (and half from its page)
LEAD_MARGIN = 0.1  # a sentence leads unless a code block or table row is this much more relevant
SUPPORT_MARGIN = 0.2  # a supporting point from elsewhere must be at least this close to the lead's relevance
BLOCKS = ("code", "row", "lead-in")  # shown as blocks, the marker on a line of its own
PROSE = ("sentence", "item", "lead-in")  # what can lead an answer, and what a release note's release is said on
MAX_BLOCK_ITEMS = 8  # list items, table rows or code blocks quoted with the sentence that introduces them
# a unit is judged by its first 600 characters (about 150 tokens): a long code block or table by its opening lines,
# at a third of the cost of embedding all of it (on realdocs-dev, cold: turn p95 1476 -> 1283 ms, same answers)
JUDGED_CHARS = 600
TITLE_WORDS = 10  # a line longer than this is not a heading
# a quoted sentence of a paragraph this short comes with the rest of it: a paragraph of a docs page is one point
# ("When using `|~` ... The matching is case-sensitive by default. Switch to case-insensitive matching by prefixing
# the regular expression with `(?i)`."); realdocs-dev answered 32 -> 33 / 34 / 34 / 34 of 75 at 40 / 60 / 90 / 120
PARAGRAPH_WORDS = 60
SAME_PAGE = 4  # candidates of the selected passages' pages the selection left out, also quoted from
Neighbours = Callable[[Sequence[str], int], Mapping[str, Sequence[Chunk]]]
"""A page's passages around the given ones (:meth:`~anaphora.store.protocols.PassageIndex.neighbours`)."""
# an amount: a number, maybe with a unit; not a part of a version ("gunicorn 20.1.0"), an address or a path
_QUANTITY = re.compile(r"(?<![\w.:/-])\d+(?:[.,]\d+)?\s?(?:%|[A-Za-z]{1,7})?(?![\w/:-]|\.\d)")
# a sentence that states the condition the next one holds under (one that refers back: support.refers_back)
_CONDITION = re.compile(r"^(when|if|unless|once|only (when|if)|with|without)\b", re.IGNORECASE)
# a heading whose last title is a name and nothing else: "Configuration > `result_expires`", "`--shims`"
_NAMED_SECTION = re.compile(r"(?:^|>)\s*(`([^`\n]+)`)\s*$")
_PERSON = re.compile(r"\b(?:i|you|we|my|your|our|me|us)\b", re.IGNORECASE)  # someone speaking, no title
_TERM = re.compile(r"^`[^`]+`$")  # a definition list's term alone on its line
_ENDS_SENTENCE = re.compile(r"[.!?:;)\]\"'`*]$")
_POINTS_ELSEWHERE = re.compile(
    r"(?:see|refer to)\b(?!.*(?:`|://))|"  # naming no setting, command or address: "see `x`" says which
    r"(?:for|to learn) (?:more|further|additional|complete|full|detailed)\b|learn more\b|"
    r"this (?:page|guide|section|document|doc|tutorial|chapter|topic|article) (?:outlines|describes|explains|covers|"
    r"shows|walks|provides|contains|lists|documents|introduces|gives|will|is about|helps)\b",
    re.IGNORECASE,
)
# "... is described in the resources and limits guide, section ...": where something is told, not what
_TOLD_ELSEWHERE = re.compile(
    r"\b(?:is|are) (?:described|documented|explained|covered|detailed|discussed) (?:in|on|under)\b"
    r"(?=[^.]*\b(?:guide|page|section|documentation|docs|chapter|reference|article|tutorial)\b)",
    re.IGNORECASE,
)
_QUOTE_MARK = re.compile(r"^(\s*>)+\s?", re.MULTILINE)
# items, rows, headings, quotes, tags, thematic breaks: lines a paragraph does not run into
_BLOCK_LINE = re.compile(r"^\s*([-*+•]\s|\d{1,3}[.)]\s|\||#{1,6}\s|>|\{[{%]|<|(-{3,}|\*{3,}|_{3,})\s*$)")


@dataclass(frozen=True, slots=True)
class PassageUnit:
    """A quotable unit of one passage."""

    position: int
    text: str
    kind: str
    end: int  # the last unit of its passage it covers (a lead-in covers what it introduces)
    context: str  # what it is scored by, when not its text (a code block: with the sentence before it)
    continued: bool  # a sentence the next unit of its paragraph continues
    term: str  # the code name on the line above its paragraph, if one is ("`Task.max_retries`:"): what it describes


def unit_fields(unit: PassageUnit) -> tuple:
    """``unit``'s fields in order (:func:`dataclasses.astuple` deep-copies each, a cost on every turn's units)."""
    return tuple(getattr(unit, name) for name in _UNIT_FIELDS)


_UNIT_FIELDS = tuple(f.name for f in fields(PassageUnit))


@dataclass(frozen=True, slots=True)
class Candidate(PassageUnit):
    """A unit of a shown passage that could be quoted, with where the passage was shown. ``rank``: its passage's
    place in its own list (documents by the selector, memories by recall: a memory shown after five documents is
    not their sixth best); ``order``: its passage's place among all those shown."""

    passage_id: str
    order: int
    rank: int
    source: str  # its passage's page
    memory: bool = False  # a unit of what the user said (a recalled memory), not of a document
    adjoining: bool = False  # a unit of a passage around a shown one: it supports a lead of its page, never leads

    def overlaps(self, other: Candidate) -> bool:
        return (
            self.order == other.order
            and self.position <= max(other.end, other.position)
            and other.position <= max(self.end, self.position)
        )


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
    quoted: tuple[Passage, ...] = ()  # the passages the points come from


@dataclass(frozen=True, slots=True)
class ExtractRequest:
    """What a turn's extract is made from: the question and the retrieval query, the documents to quote (the
    selection and its pages' other passages), the user's facts that lead the answer, the memories of earlier
    conversations that may be quoted, the line that says back what of the user's message was taken into account,
    and whose turn it is (the pipeline fills it from the turn: ``TurnState.extract_request``)."""

    question: str
    query: str
    documents: tuple[Passage, ...] = ()
    leading: tuple[Passage, ...] = ()
    others: tuple[Passage, ...] = ()
    said_back: str = ""
    user: str = ""


class ExtractiveAnswerer:
    def __init__(
        self,
        embedder: Embedder,
        *,
        max_points: int = 4,
        max_words: int = 120,
        min_relevance: float = 0.25,
        diversity: float = 0.3,
        vectors: SentenceVectors | None = None,
        neighbours: Neighbours | None = None,
        neighbour_span: int = 0,
    ) -> None:
        """``max_words``: the answer's length budget (about a reference answer's: 100-110 words on both dev
        domains), filled with the best points, at most ``max_points``; ``min_relevance``: the similarity to the
        retrieval query or the message a sentence needs to be quoted at all (below it for every sentence, the
        answer abstains; realdocs-dev answered 34 -> 35 of 75 with either instead of their mean);
        ``diversity``: MMR's weight on not repeating a chosen sentence; ``vectors``: where the sentences' vectors
        come from (default: ``embedder`` behind an in-process memo, :class:`SentenceVectors`); ``neighbours``
        and ``neighbour_span``: where the passages around a shown one are read, and how many on each side of the
        shown passages of the lead's page may support the lead (0: none; :meth:`around`, :meth:`answer_turn`)."""
        self.embedder = embedder
        self.neighbours = neighbours
        self.neighbour_span = neighbour_span if neighbours is not None else 0
        self.vectors = vectors or SentenceVectors(embedder)
        self.max_points = max_points
        self.max_words = max_words
        self.min_relevance = min_relevance
        self.diversity = diversity

    @staticmethod
    def candidates(
        passages: Sequence[Passage],
        memories: Sequence[Passage] = (),
        ranks: Sequence[int] | None = None,
        adjoining: int = 0,
    ) -> list[Candidate]:
        """Every quotable unit of the documents, then of the memories. ``ranks``: each document's rank (default:
        its place in ``passages``); ``adjoining``: how many of the last documents are passages around the shown
        ones (:meth:`around`)."""
        documents = list(ranks) if ranks is not None else range(len(passages))
        first_adjoining = len(passages) - adjoining
        shown = [*zip(documents, passages, strict=True), *enumerate(memories)]
        return [
            Candidate(
                *unit_fields(u),
                passage_id=passage.id,
                order=order,
                rank=rank,
                source=passage.source,
                memory=order >= len(passages),
                adjoining=first_adjoining <= order < len(passages),
            )
            for order, (rank, passage) in enumerate(shown)
            for u in passage_units(passage.text, entry=bool(_NAMED_SECTION.search(passage.heading)))
        ]

    async def answer_turn(self, request: ExtractRequest) -> ExtractiveAnswer | None:
        """A turn's extract: from the passages selected and the memories recalled (what the prompt would show, not
        cut by its budget), for the retrieval query and the question. The user's facts that a question about the
        user asks for lead, said back to the user; the documents' best sentences follow. With ``neighbour_span``,
        once the lead is chosen, the passages around the shown passages of its page are scored with them: they may
        support the lead by their own relevance (no bonus for their page), never lead (docs/answers.md)."""
        leading = request.leading
        if facts_answer(read(request.question), [f.text for f in leading]):  # "which version did I say we run?"
            return said_back_first(request.said_back, facts_first(leading, None), request.question)
        documents = request.documents
        quoted = await self.answer(request.query, request.question, documents, request.others, user=request.user)
        if quoted is not None and self.neighbour_span and quoted.points[0].order < len(documents):
            # the passages around the lead's page's shown passages may support it (never lead: the lead stays)
            page = documents[quoted.points[0].order].source
            around, ranks = await asyncio.to_thread(self.around, documents, page)
            if around:
                widened = await self.answer(
                    request.query,
                    request.question,
                    [*documents, *around],
                    request.others,
                    user=request.user,
                    ranks=[*range(len(documents)), *ranks],
                    adjoining=len(around),
                )
                quoted = widened or quoted
        return said_back_first(request.said_back, facts_first(leading, quoted), request.question)

    def around(self, shown: Sequence[Passage], page: str | None = None) -> tuple[list[Passage], list[int]]:
        """The passages within ``neighbour_span`` of a shown passage (of ``page``, when given) in its document that
        are not shown themselves (the first stage returns a page's passage that matched the question; the fact it
        asks for is often in the next one: the setting under the paragraph that explains it), each with the rank
        of the shown passage it adjoins (its place in ``shown``): it continues that passage. In the shown
        passages' order, each one's in page order. Blocking (a store read)."""
        anchors = [(rank, p) for rank, p in enumerate(shown) if page is None or p.source == page]
        if not self.neighbour_span or self.neighbours is None or not anchors:
            return [], []
        found = self.neighbours([p.id for _, p in anchors], self.neighbour_span)
        seen = {p.id for p in shown}
        passages: list[Passage] = []
        ranks: list[int] = []
        for rank, anchor in anchors:
            for chunk in found.get(anchor.id, ()):
                if chunk.id in seen:
                    continue
                seen.add(chunk.id)
                passages.append(
                    Passage(id=chunk.id, text=chunk.text, source=chunk.source, heading=chunk.heading, score=0.0)
                )
                ranks.append(rank)
        return passages, ranks

    async def answer(
        self,
        query: str,
        question: str,
        passages: Sequence[Passage],
        memories: Sequence[Passage] = (),
        *,
        user: str = "",
        ranks: Sequence[int] | None = None,
        adjoining: int = 0,
    ) -> ExtractiveAnswer | None:
        """The quoted answer from the documents' and ``user``'s memories' sentences, or ``None`` when no sentence
        is relevant enough. ``ranks``: each document's rank (default: its place in ``passages``); ``adjoining``:
        how many of the last documents are passages around the shown ones, which only support a lead of their
        page (:meth:`around`)."""
        found = self.candidates(passages, memories, ranks, adjoining)
        if not found:
            return None
        texts = [judged(c.context or c.text) for c in found]
        queries = list(dict.fromkeys([query, question]))
        documents = sum(1 for c in found if c.order < len(passages))  # the documents' units come first
        asked, sentences = await asyncio.to_thread(
            self.vectors.turn, queries, texts[:documents], texts[documents:], user=user
        )
        per_query = sentences @ asked.T
        similarity = per_query.mean(axis=1)
        wanted = content_set(query) | content_set(question)
        overlap = np.array([len(content_set(t) & wanted) / (len(wanted) or 1) for t in texts])
        quotes_code = np.array([c.kind == "code" or "`" in c.text for c in found], dtype=float)
        ranks = np.array([c.rank for c in found])
        procedure = np.array([c.kind == "lead-in" and "```" in c.text for c in found]) & read(question).asks_how
        amount = np.array([bool(_QUANTITY.search(c.text)) for c in found] if read(question).asks_amount else [False])
        relevance = similarity + 0.2 * overlap + CODE_BONUS * (quotes_code + procedure + amount) - RANK_PENALTY * ranks
        chosen = self._select(found, relevance, per_query.max(axis=1), sentences)
        if not chosen:
            return None
        chosen = with_lead_ins(found, chosen)
        texts_of = named_entries(found, in_context(found, chosen), {p.id: p.heading for p in passages})
        lead, *rest = (
            Extract(
                found[i].passage_id,
                texts_of[i],
                found[i].kind,
                found[i].order,
                found[i].position,
                float(relevance[i]),
            )
            for i in chosen
            if i in texts_of
        )
        points = (lead, *sorted(rest, key=lambda e: (e.order, e.position)))
        used = {p.passage_id for p in points}
        quoted = tuple(p for p in (*passages, *memories) if p.id in used)
        return ExtractiveAnswer(format_points(points), points, quoted)

    def _select(
        self, found: list[Candidate], relevance: np.ndarray, similarity: np.ndarray, vectors: np.ndarray
    ) -> list[int]:
        """The lead (the most relevant sentence, list item or introduced block), then supporting points by MMR,
        preferably from the lead's passage and page; a point from elsewhere must come close to the lead.
        ``similarity``: each unit's best similarity to the retrieval query or the message (a unit close to either
        can be quoted: "does any of what you told me change?" is close to nothing, its expansion is not)."""
        relevant = similarity >= self.min_relevance
        adjoining = np.array([c.adjoining for c in found], dtype=bool)
        leads = relevant & ~adjoining  # a passage around a shown one never leads: it adds to what the shown say
        prose = np.array([c.kind in PROSE for c in found]) & leads
        pool = prose if prose.any() else leads
        if not pool.any():
            return []
        lead = int(np.argmax(np.where(pool, relevance, -np.inf)))
        best = int(np.argmax(np.where(leads, relevance, -np.inf)))
        if relevance[best] - relevance[lead] > LEAD_MARGIN:  # a row or block answers far better than any sentence
            lead = best
        # a passage around a shown one gets no bonus for its page: it wins a point only by its own relevance
        near = np.array([0.0 if c.adjoining else closeness(c, found[lead]) for c in found])
        boosted = relevance + near
        lengths = [len(c.text.split()) for c in found]
        chosen = [lead]
        others = alternatives(found)
        blocked = np.array([c.overlaps(found[lead]) or repeats(c, found[lead]) for c in found]) | ~relevant
        blocked[list(others.get(lead, ()))] = True
        blocked |= (near == 0) & (relevance < relevance[lead] - SUPPORT_MARGIN)
        blocked |= adjoining & np.array([c.source != found[lead].source for c in found])  # only the lead's page
        while len(chosen) < self.max_points:
            redundancy = (vectors @ vectors[chosen].T).max(axis=1)
            score = (1 - self.diversity) * boosted - self.diversity * redundancy
            score[blocked] = -np.inf
            best = int(np.argmax(score))
            if not np.isfinite(score[best]) or (redundancy[best] > 0.9 and says_again(found[best], found, chosen)):
                break
            blocked[best] = True
            if sum(lengths[i] for i in chosen) + lengths[best] > self.max_words:
                continue  # too long for what is left of the budget
            chosen.append(best)
            blocked |= np.array([c.overlaps(found[best]) or repeats(c, found[best]) for c in found])
            blocked[list(others.get(best, ()))] = True
        return chosen


def passage_units(text: str, *, entry: bool = False) -> list[PassageUnit]:
    """The quotable units of one passage's text, in order (``entry``: a reference entry's, :func:`is_title`)."""
    split = split_units(reflow(text))  # once: the spans, the running paragraphs and the terms all read it
    spans = spans_of(split, entry=entry)
    running, terms = running_on(split), terms_above(split)
    units = []
    for n, (start, end, unit, kind) in enumerate(spans):
        before = spans[n - 1] if n else None  # a code block says little alone: score it with its sentence
        context = f"{before[2]}\n{unit}" if kind == "code" and before and before[1] == start - 1 else ""
        continued = kind == "sentence" and end in running
        units.append(PassageUnit(start, unit, kind, end, context, continued, terms.get(start, "")))
    return units


# a line that is only a code name, a term its paragraph describes: "`--remove`", "`Task.max_retries`:", or a label
# shaped as one (a Sphinx object's signature, rendered "Task.max_retries:": words joined by _ or .)
_TERM_LINE = re.compile(r"(`[^`\n]+`):?|([A-Za-z_]\w*(?:\.[A-Za-z_]\w+|_\w+)+(?:\(\))?):")


def terms_above(units: Sequence[Unit]) -> dict[int, str]:
    """The positions of the sentences of each paragraph right under a line that is only a code name, each with
    that name: an entry of a reference page (a Sphinx attribute, a flag of a Markdown CLI page)."""
    out: dict[int, str] = {}
    term = ""
    for n, unit in enumerate(units):
        alone = "\n\n" in unit.separator and (n == 0 or "\n\n" in units[n - 1].separator)
        named = _TERM_LINE.fullmatch(unit.text.strip()) if unit.kind == "sentence" and alone else None
        if named:
            term = named.group(1) or f"`{named.group(2)}`"
            continue
        if term and unit.kind == "sentence":
            out[n] = term
        if "\n\n" in unit.separator or unit.kind != "sentence":
            term = ""
    return out


def judged(text: str) -> str:
    """What of a unit (or its context) the answerer embeds: its opening :data:`JUDGED_CHARS` characters."""
    return text[:JUDGED_CHARS]


def judged_texts(text: str) -> list[str]:
    """Every text the answerer embeds when it reads a passage of ``text``: what ingestion embeds ahead (into the
    embedding cache) so that a passage's first quote costs no embedding."""
    return list(dict.fromkeys(judged(unit.context or unit.text) for unit in passage_units(text, entry=True)))


def running_on(units: Sequence[Unit]) -> set[int]:
    """Positions (as :func:`quotable_spans` numbers units) of the sentences whose paragraph goes on after them."""
    return {
        n
        for n, unit in enumerate(units[:-1])
        if unit.kind == "sentence" and units[n + 1].kind == "sentence" and "\n" not in unit.separator
    }


_LABEL = re.compile(r"^[^\n.!?]{1,40}:$")  # "Structured (YAML):", "Labels:", "File (TOML):": a tab's title


def alternatives(found: Sequence[Candidate]) -> dict[int, set[int]]:
    """For each unit of a run of labelled code blocks (a tab group: "Structured (YAML):", "Structured (TOML):",
    "Labels:" above the same configuration in each syntax), the units of the run's other blocks: one of them says
    what the others say, in another format, and quoting three of them fills the answer with one fact."""
    runs: list[list[int]] = []
    for n, c in enumerate(found):
        label = c.kind == "lead-in" and "```" in c.text and bool(_LABEL.match(c.text.split("\n", 1)[0].strip()))
        if not label:
            continue
        last = runs[-1][-1] if runs else None
        if last is not None and found[last].order == c.order and c.position == found[last].end + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    out: dict[int, set[int]] = {}
    for run in (r for r in runs if len(r) > 1):
        for n in run:
            spans = [(found[m].order, found[m].position, found[m].end) for m in run if m != n]
            siblings = {
                k
                for k, c in enumerate(found)
                for order, start, end in spans
                if c.order == order and start <= c.position <= end
            }
            out[n] = siblings
            for k, c in enumerate(found):  # the bare block under a label belongs to its label's run
                if c.kind == "code" and c.order == found[n].order and c.position == found[n].end:
                    out[k] = siblings
    return out


def with_lead_ins(found: Sequence[Candidate], chosen: Sequence[int]) -> list[int]:
    """Each chosen bare code block replaced by the unit that quotes it with the sentence introducing it ("Run the
    following command ..., changing the architecture if needed:"), when there is one: a command says what to type,
    its sentence says what it is for. Not when that sentence is already quoted (a paragraph's opening sentence is a
    point of its own too) or the lead-in repeats another point."""
    introducing = {(c.order, c.end): n for n, c in enumerate(found) if c.kind == "lead-in"}
    out: list[int] = []
    for i in chosen:
        j = introducing.get((found[i].order, found[i].position)) if found[i].kind == "code" else None
        said = j is not None and any(
            found[j].overlaps(found[k]) or repeats(found[k], found[j]) for k in chosen if k != i
        )
        out.append(j if j is not None and not said else i)
    return out


def in_context(found: Sequence[Candidate], chosen: Sequence[int]) -> dict[int, str]:
    """Each chosen point's text, a sentence quoted with the sentences of its paragraph it cannot do without: all
    of them when the paragraph is short (at most :data:`PARAGRAPH_WORDS` words); else

    - the one before it, when that states the condition it holds under ("When configured with `auth_enabled:
      false`, Loki uses a single tenant. The `X-Scope-OrgID` header is not required ...": alone, the second says
      something the page does not) or when it refers back to that one ("This field tells Traefik ...",
      "Therefore, ...");
    - the one after it, when that names something it does not (a setting, a command, a value): "One solution is to
      increase the rate limits. The config options to use are `ingestion_rate_mb` and `ingestion_burst_size_mb`." -
      the sentence that matched the question is seldom the one that holds what to type.

    A sentence is quoted once: one chosen on its own as well, or needed by two points, comes joined to the first."""
    at = {(c.order, c.position): n for n, c in enumerate(found) if c.kind == "sentence"}
    texts: dict[int, str] = {}
    joined: set[int] = set()  # sentences quoted inside another point
    for i in chosen:
        if i in joined:
            continue
        if (paragraph := short_paragraph(found, at, i)) and not set(paragraph) & {*texts, *joined}:
            texts[i] = " ".join(found[m].text for m in paragraph)
            joined |= set(paragraph) - {i}
            continue
        text = found[i].text
        before = at.get((found[i].order, found[i].position - 1)) if found[i].kind == "sentence" else None
        if before is not None and before not in {*chosen, *joined} and depends_on(found[i].text, found[before]):
            text = f"{found[before].text} {text}"
            joined.add(before)
        following = at.get((found[i].order, found[i].end + 1)) if found[i].continued else None
        taken = {*texts, *joined}
        if following is not None and following not in taken and names_more(found[following].text, found[i].text):
            text = f"{text} {found[following].text}"
            joined.add(following)
        texts[i] = text
    return texts


def short_paragraph(found: Sequence[Candidate], at: dict[tuple[int, int], int], i: int) -> list[int]:
    """The sentences of ``found[i]``'s paragraph, in order, when it has more than one and at most
    :data:`PARAGRAPH_WORDS` words; else none. A memory's sentences are what the user said, each a statement of its
    own: not a paragraph of a page (LoCoMo answer token F1 0.0641 -> 0.0512 when they were quoted whole)."""
    if found[i].kind != "sentence" or found[i].memory:
        return []
    paragraph = [i]
    while (before := at.get((found[i].order, found[paragraph[0]].position - 1))) is not None and found[
        before
    ].continued:
        paragraph.insert(0, before)
    while found[paragraph[-1]].continued:
        if (after := at.get((found[i].order, found[paragraph[-1]].end + 1))) is None:
            break
        paragraph.append(after)
    words = sum(len(found[n].text.split()) for n in paragraph)
    return paragraph if len(paragraph) > 1 and words <= PARAGRAPH_WORDS else []


def depends_on(sentence: str, before: Candidate) -> bool:
    """``sentence`` cannot be quoted without ``before``, the sentence of its paragraph right before it: that one
    states the condition it holds under, or ``sentence`` refers back to it."""
    return before.continued and bool(_CONDITION.match(before.text) or refers_back(sentence))


def named_entries(found: Sequence[Candidate], texts: dict[int, str], headings: Mapping[str, str]) -> dict[int, str]:
    """The first sentence of each entry that the answer says said :func:`under_name` of what it describes: the
    term above its paragraph, else its section's name; and the first sentence, item or lead-in it quotes of each
    release of a release-notes page said under that release (:func:`release_of`). Once each: the points after it
    are read under it. The answer says the lead (the first of ``texts``), then the rest in the passages' order."""
    out: dict[int, str] = {}
    named: set[tuple[str, str]] = set()  # (passage, entry name) said
    released: set[tuple[str, str]] = set()  # (page, release) said
    lead, *rest = texts
    for i in (lead, *sorted(rest, key=lambda i: (found[i].order, found[i].position))):
        out[i] = texts[i]
        heading = headings.get(found[i].passage_id, "")
        name = found[i].term or entry_name(heading)
        if name and (found[i].passage_id, name) not in named and found[i].kind == "sentence":
            out[i] = under_name(texts[i], name)
            named.add((found[i].passage_id, name))
        release = release_of(found[i].source, heading)
        if release and (found[i].source, release) not in released and found[i].kind in PROSE:
            out[i] = in_release(out[i], release)
            released.add((found[i].source, release))
    return out


_VERSION = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)+(?:[-.]?(?:a|b|rc|alpha|beta)\d*)?)(?![\w.]*\d)", re.IGNORECASE)


def release_of(source: str, heading: str) -> str:
    """The release a passage of a release-notes page (:func:`~anaphora.answering.select.release_notes`) is about:
    the most specific version its heading path names ("Change history > 5.5.0 > Key Highlights": 5.5.0; "V2.9 > Bug
    fixes > 2.9.4 (2024-01-24)": 2.9.4), or "" (another page, or no version in its headings)."""
    if not release_notes(source):
        return ""
    versions = [m.group(1) for part in heading.split(">") for m in _VERSION.finditer(part)]
    return versions[-1] if versions else ""


def in_release(text: str, release: str) -> str:
    """A point of release notes said with its release, when it does not name it: "This release introduces support
    for Pydantic models" or "- Support async views" answers "can it do that on our version?" only with the version
    the page's heading gives it. A list item keeps its mark first."""
    if release in text:
        return text
    mark = text[: len(text) - len(without_item_mark(text))]
    return f"{mark}In {release}: {text[len(mark) :]}"


def entry_name(heading: str) -> str:
    """The name (a code span) a section documents: its last title when that is a name and nothing else."""
    section = _NAMED_SECTION.search(heading)
    return section.group(1) if section else ""


def under_name(text: str, name: str) -> str:
    """A sentence of a reference entry said under the name (a code span) it describes, when it does not say it: in
    a page of settings, commands or flags, the name is the section's title (``Configuration > `result_expires```)
    or the term above the entry, and the entry's text only describes it ("Time (in seconds) for when after stored
    task tombstones will be deleted."). Quoted alone, it would not tell the reader what to set."""
    if normalise_token(name.strip("`")) in risky_tokens(text):
        return text
    return f"{name}: {text}"


def names_more(following: str, sentence: str) -> bool:
    """``following`` names a setting, command or value that ``sentence`` does not."""
    return bool(set(risky_tokens(following)) - set(risky_tokens(sentence)))


def same_page(candidates: Sequence[Passage], selected: Sequence[Passage], limit: int = SAME_PAGE) -> list[Passage]:
    """Candidates from the selected passages' pages that the selection left out, best first: the page the
    retriever found is where the rest of the answer is (the command under "Installing with Helm" when the page's
    introduction ranked first)."""
    shown = {p.id for p in selected}
    pages = {p.source for p in selected if p.source}
    return [p for p in candidates if p.source in pages and p.id not in shown][:limit]


def says_again(candidate: Candidate, found: Sequence[Candidate], chosen: Sequence[int]) -> bool:
    """Most of the candidate's words are the chosen points' already: close in meaning *and* in words. Close in
    meaning alone is not a repeat ("increase the rate limits" beside "decrease the rate of log lines" is the other
    half of the advice, and an embedding puts the two together)."""
    said = content_union(found[i].text for i in chosen)
    words = content_set(candidate.text)
    return not words or len(words & said) / len(words) >= REPEATED_WORDS


def repeats(candidate: Candidate, chosen: Candidate) -> bool:
    """The same words as a chosen point, or a part of it (overlapping chunks repeat their edges)."""
    return candidate.text in chosen.text or chosen.text in candidate.text


def closeness(candidate: Candidate, lead: Candidate) -> float:
    """The bonus of a supporting point for coming from the lead's passage, or (half) from the same page."""
    if candidate.order == lead.order:
        return SAME_PASSAGE
    return SAME_PASSAGE / 2 if candidate.source and candidate.source == lead.source else 0.0


def facts_first(facts: Sequence[Passage], quoted: ExtractiveAnswer | None) -> ExtractiveAnswer | None:
    """The user's facts, one line each with its id ("You run Fluent Bit 2.1 on ARM64 nodes. [memory:..]"), before
    the quoted answer."""
    if not facts:
        return quoted
    lead = tuple(Extract(f.id, said_to_user(f.text), "sentence", order, 0, 1.0) for order, f in enumerate(facts))
    points = lead + (quoted.points if quoted is not None else ())
    text = "\n\n".join([*(f"{p.text} [{p.passage_id}]" for p in lead), *([quoted.text] if quoted else [])])
    return ExtractiveAnswer(text, points, (*facts, *(quoted.quoted if quoted is not None else ())))


def said_back_first(line: str, quoted: ExtractiveAnswer | None, question: str) -> ExtractiveAnswer | None:
    """The quoted answer opened with what of the user's previous message it took into account (nothing to say
    when nothing was quoted, or when what was quoted names nothing the user said: "As you said, you use pytest"
    before a custom 404 page would claim a bearing the quote does not have)."""
    if not line or quoted is None or not bears_on(line, read(question), quoted.text):
        return quoted
    return replace(quoted, text=f"{line}\n\n{quoted.text}")


def quotable_units(text: str) -> list[tuple[int, str, str]]:
    """(position, text, kind) of :func:`quotable_spans`."""
    return [(start, text, kind) for start, _, text, kind in quotable_spans(text)]


def quotable_spans(text: str, *, entry: bool = False) -> list[tuple[int, int, str, str]]:
    """(first, last position, text, kind) of the units of ``text`` that can be quoted on their own: code blocks,
    sentences and list items of at least :data:`MIN_WORDS` words that do not ask, table rows under their table's
    header (a row alone is a line of values without names), and a sentence that introduces what follows ("Run:",
    "Use the following settings") together with the code block, list or table it introduces (``lead-in``; alone,
    it is never quoted). Blockquote marks are taken off, so a quote never nests."""
    return spans_of(split_units(reflow(text)), entry=entry)


def spans_of(units: Sequence[Unit], *, entry: bool = False) -> list[tuple[int, int, str, str]]:
    """:func:`quotable_spans` of a text already split into units."""
    lines = [_QUOTE_MARK.sub("", u.text).strip() for u in units]
    found = []
    header: list[str] = []  # the current table's header row and delimiter row, once both have been seen
    first_row: str | None = None  # a row that may be a table's header
    for position, (unit, line) in enumerate(zip(units, lines, strict=True)):
        if unit.kind == "row":
            if header:
                found.append((position, position, "\n".join([*header, line]), "row"))
            elif first_row is not None and DELIMITER_ROW.match(line):
                header = [first_row, line]
            else:
                first_row = line
            continue
        header, first_row = [], None
        if unit.kind != "code" and introduces(line):
            end, block = introduced(units, lines, position + 1)
            if block:
                found.append((position, end, f"{line}\n\n{block}", "lead-in"))
            continue
        if unit.kind == "code" or (
            len(line.split()) >= MIN_WORDS
            and not line.endswith("?")
            and not is_title(units, position, line, entry=entry)
            and not points_elsewhere(line)
        ):
            found.append((position, position, line, unit.kind))
        opening = paragraph_start(units, position - 1) if unit.kind == "code" else None
        if (
            opening is not None
            and not (opening == position - 1 and introduces(lines[opening]))  # quoted with it above already
            and len(lines[opening].split()) >= MIN_WORDS
            and not lines[opening].endswith("?")
        ):
            # the paragraph just before a code block says what it is for: its first sentence introduces it
            found.append((opening, position, f"{lines[opening]}\n\n{line}", "lead-in"))
    return found


def points_elsewhere(sentence: str) -> bool:
    """The sentence only sends the reader to another page or says what this one is about ("See the Metrics
    Documentation for details.", "For more information, refer to ...", "This page explains how to upgrade ..."):
    every docs site writes them, and quoted they spend a point of the answer on nothing."""
    text = without_item_mark(sentence)
    names = "`" in text or "://" in text  # a setting, a command or an address is something said
    return bool(_POINTS_ELSEWHERE.match(text) or (_TOLD_ELSEWHERE.search(text) and not names))


def is_title(units: Sequence[Unit], position: int, line: str, *, entry: bool = False) -> bool:
    """A short line that is a paragraph of its own and ends without punctuation: a heading that a merged section
    kept as text ("Postgres STARTTLS with TCP TLS PassThrough routers"), a rubric or a caption ("Retry
    configuration for the Database backend", "How to set up test reports"), which names what follows and answers
    nothing. In sentence case, not when someone speaks in it (a forum post's unpunctuated "I think you should buy
    an index fund"), it quotes code or it describes a term: the line under a flag or under a reference entry's
    title (``entry``: "Remove the tool(s) from config file" under `--remove`) is what it does."""
    tokens = line.split()
    if units[position].kind != "sentence" or _ENDS_SENTENCE.search(line) or len(tokens) > TITLE_WORDS:
        return False
    alone_before = position == 0 or "\n\n" in units[position - 1].separator
    alone = alone_before and ("\n\n" in units[position].separator or position == len(units) - 1)
    if 2 * sum(t[:1].isupper() for t in tokens) >= len(tokens):
        return alone
    term = position > 0 and _TERM.match(units[position - 1].text.strip())
    spoken = line[:1].islower() or _PERSON.search(line)  # "i think you should just buy an index fund"
    return alone and not entry and not spoken and "`" not in line and not term


def paragraph_start(units: Sequence[Unit], last: int) -> int | None:
    """The first sentence of the paragraph that ends at ``last`` (a sentence right before a block), or None."""
    if last < 0 or units[last].kind != "sentence":
        return None
    first = last
    while first > 0 and units[first - 1].kind == "sentence" and units[first - 1].separator.count("\n") < 2:
        first -= 1
    return first


def reflow(text: str) -> str:
    """Soft line breaks joined, as Markdown reads them: the lines of a paragraph are one paragraph (a sentence
    wrapped over two lines is one sentence); code blocks, list items, table rows, headings and blank lines stay."""
    out: list[str] = []
    in_code = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_code = not in_code
            out.append(line)
            continue
        plain = line.strip() and not in_code and not _BLOCK_LINE.match(line)
        previous = out[-1] if out else ""
        joinable = previous.strip() and not FENCE.match(previous) and not _BLOCK_LINE.match(previous)
        if plain and joinable:
            out[-1] = f"{previous.rstrip()} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


def introduced(units: Sequence[Unit], lines: Sequence[str], start: int) -> tuple[int, str]:
    """(last position, text) of the code block, list or table that begins at ``start``; ``(start, "")`` when
    what follows is not one. Code blocks of one language that follow each other with no text between are one
    thing introduced ("create a user, a vhost and allow the user on it:" and its three commands); blocks in other
    languages (a config shown as YAML, then as TOML) are alternatives, and only the first is."""
    if start >= len(units) or units[start].kind not in ("code", "item", "row"):
        return start, ""
    kind, end = units[start].kind, start

    def opening(n: int) -> str:  # a code block's fence line says its language
        return lines[n].split("\n", 1)[0].strip() if kind == "code" else ""

    while (
        end + 1 < len(units)
        and units[end + 1].kind == kind
        and end + 1 - start < MAX_BLOCK_ITEMS
        and opening(end + 1) == opening(start)
    ):
        end += 1
    return end, ("\n\n" if kind == "code" else "\n").join(lines[start : end + 1])


def format_points(points: Sequence[Extract]) -> str:
    """The lead, then the supporting points, each with its passage id (no quote marks: every point is quoted)."""

    def cited(point: Extract) -> str:
        if point.kind in ("row", "lead-in") and not point.text.endswith("```"):
            return f"{point.text}\n\n[{point.passage_id}]"  # after a table or list the marker needs a blank line
        if point.kind in BLOCKS:
            return f"{point.text}\n[{point.passage_id}]"
        return f"{point.text} [{point.passage_id}]"

    return "\n\n".join(cited(p) for p in points)
