"""Entity boosting: passages that mention the named things of the conversation move up the fused list, damped.

A follow-up often leaves out the name the conversation is about ("and on ARM?" after "k3s on Raspberry Pi 4").
The conversation's **entities** are the words its user turns use as names: capitalised inside a sentence, written
in capitals, or mixing letters and digits ("k3s", "IRA", "Pi4"). The corpus then decides which of them are names:
a word counts only when it is rare here (specificity at least :data:`~anaphora.retrieval.terms.NAMES_TOPIC`, in
at most ``sqrt(N)`` passages). So a capitalised ordinary word ("Tell", "Service", a sentence's first word) never
triggers a boost, whatever its case, and an entity many passages mention weighs less than a rare one: its weight is
its specificity (the damping Mem0 applies to entities linked to many memories, taken from the corpus itself).

A candidate's fused score is multiplied by ``1 + strength * (1 - exp(-w))``, where ``w`` is the summed weight of
the entities it mentions: saturating (five entities are not five times one) and never more than ``1 + strength``.
The boost only reorders the first stage's candidates; it adds none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from anaphora.retrieval.bm25 import bm25_tokens
from anaphora.retrieval.terms import NAMES_TOPIC, TermStatistics, word_specificity
from anaphora.types import Message, Passage

_WORD = re.compile(r"[\w][\w\-.]*[\w]|\w")
_SENTENCE_START = re.compile(r"(^|[.!?:;]\s+|\n)\s*[\"'(\[]*$")


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    tokens: frozenset[str]  # as the lexical index sees the name (stemmed, lower-cased)
    weight: float  # the name's specificity in this corpus, in [NAMES_TOPIC, 1]


def name_like(text: str) -> list[str]:
    """Words written as names: a capital letter not at a sentence's start, all capitals, or letters with digits."""
    found = []
    for match in _WORD.finditer(text):
        word = match.group()
        has_digit = any(c.isdigit() for c in word)
        has_alpha = any(c.isalpha() for c in word)
        if not has_alpha or len(word) < 2:
            continue
        capitals = sum(c.isupper() for c in word)
        sentence_start = bool(_SENTENCE_START.search(text[: match.start()]))
        if (has_digit and has_alpha) or capitals >= 2 or (capitals and not sentence_start):
            found.append(word)
    return found


def conversation_entities(
    question: str, history: Sequence[Message], statistics: TermStatistics | None, *, turns: int = 3
) -> list[Entity]:
    """The named things of the message and the last ``turns`` user turns that are rare in this corpus."""
    if statistics is None or statistics.passages <= 1:
        return []
    recent = [m.content for m in history if m.role == "user"][-turns:]
    names = list(dict.fromkeys(name for text in (*recent, question) for name in name_like(text)))
    if not names:
        return []
    weights = word_specificity(names, statistics)
    entities: dict[frozenset[str], Entity] = {}
    for name in names:
        tokens = frozenset(bm25_tokens([name])[0])
        if tokens and weights[name] >= NAMES_TOPIC and tokens not in entities:
            entities[tokens] = Entity(name, tokens, weights[name])
    return list(entities.values())


def boost(passages: Sequence[Passage], entities: Sequence[Entity], strength: float) -> list[Passage]:
    """The passages re-ordered by their boosted scores (stable for equal scores); unchanged without entities."""
    if not entities or strength <= 0 or not passages:
        return list(passages)
    token_lists = bm25_tokens([p.text for p in passages])
    boosted = []
    for passage, tokens in zip(passages, token_lists, strict=True):
        present = set(tokens)
        mentioned = sum(e.weight for e in entities if e.tokens <= present)
        factor = 1.0 + strength * (1.0 - math.exp(-mentioned))
        boosted.append(passage.model_copy(update={"score": passage.score * factor}) if mentioned else passage)
    return sorted(boosted, key=lambda p: -p.score)
