"""Second stage: rerank the first-stage candidates, drop the weak ones, keep the best few.

Scores are normalised so thresholds mean something: the first stage's similarity is the dense cosine similarity of
query and passage; rerankers return [0, 1]. A reranker failure keeps the first-stage order (the select stage falls
back to :meth:`PassageSelector.first_stage`; fail open, counted).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from anaphora.answering.support import only_table, table_cells, table_lines
from anaphora.rerank.base import Reranker
from anaphora.text import content_set
from anaphora.types import Passage, StageStatus

# Without a reranker, a passage made only of table rows whose keys the query does not name has its first-stage score
# scaled by this: a page's option reference matches a question on the product's name alone ("How do I send logs to
# Elasticsearch?" against the twelve chunks of the Elasticsearch output's option table) and fills the top k with rows
# nobody asked for. realdocs-dev answered 35 -> 37 of 75 (the same at 0.3, 0.5 and 0.7); docs/benchmarks.md.
UNASKED_TABLE = 0.5
_NAME_BREAK = re.compile(r"[^0-9A-Za-z]+")

# Without a reranker, a passage of a release-notes page (a changelog, "what's new in 3.0", release-notes/v3-2) has its
# first-stage score scaled by this unless the user's message asks about versions or changes: such pages name every
# feature the product has, once per release, and a how-to question matches a 2012 changelog line about its feature
# as well as the page that explains it today. Release notes are a page kind of nearly every docs site (Sphinx's
# changes.rst, a Hugo release-notes section), so the prior is read from the page's path, not from one site.
UNASKED_RELEASE_NOTES = 0.5
_RELEASE_PAGE = re.compile(
    r"(?:^|/)(?:change[-_]?log|changes|release[-_]?notes?|releases|whats?[-_]?new|news|history)(?=[-_./\d]|$)",
    re.IGNORECASE,
)
# a message about versions or changes: a version number, or the words people use for releases and what they changed
_ASKS_CHANGES = re.compile(
    r"\b(?:v?\d+\.\d+(?:\.\d+)?|change[-_ ]?log|changed|releases?|released|versions?|upgrad\w*|downgrad\w*|"
    r"deprecat\w*|introduced|history|regressions?|backport\w*|what's new|new in|fixed|bugs?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Selection:
    passages: list[Passage]  # every survivor, best first
    status: StageStatus
    detail: str


class PassageSelector:
    def __init__(
        self,
        reranker: Reranker,
        *,
        similarity_threshold: float = 0.30,
        rerank_threshold: float = 0.30,
        timeout_s: float = 10.0,
    ) -> None:
        """``timeout_s``: the select stage's time budget (a reranker that takes longer is abandoned)."""
        self.reranker = reranker
        self.similarity_threshold = similarity_threshold
        self.rerank_threshold = rerank_threshold
        self.timeout_s = timeout_s

    def _similar_enough(self, passage: Passage) -> bool:
        # without a dense score (BM25-only retrieval) the similarity threshold cannot apply
        return passage.dense_score is None or passage.dense_score >= self.similarity_threshold

    def first_stage(self, candidates: Sequence[Passage], query: str = "", message: str = "") -> Selection:
        """The candidates above the similarity threshold, in first-stage order (tables the ``query`` does not ask
        about and release notes when the user's ``message`` does not ask about changes after the rest,
        :func:`unasked_later`; a reranker, if any, then orders them itself)."""
        kept = unasked_later([p for p in candidates if self._similar_enough(p)], query, message or query)
        dropped = len(candidates) - len(kept)
        note = f"{dropped} below similarity {self.similarity_threshold:g}" if dropped else ""
        return Selection(kept, "skipped", note or "first-stage order")

    async def run(self, query: str, candidates: Sequence[Passage], message: str = "") -> Selection:
        """Raises when the reranker fails (the caller keeps :meth:`first_stage`)."""
        first = self.first_stage(candidates, query, message)
        kept = first.passages
        if not kept:
            return first
        scores = await self.reranker.score(query, [p.text for p in kept])
        if scores is None:  # the reranker has no opinion
            return first
        if len(scores) != len(kept):
            raise ValueError(f"{len(scores)} scores for {len(kept)} passages")
        ranked = sorted(
            (p.model_copy(update={"rerank_score": s}) for p, s in zip(kept, scores, strict=True)),
            key=lambda p: -(p.rerank_score or 0.0),
        )
        survivors = [p for p in ranked if (p.rerank_score or 0.0) >= self.rerank_threshold]
        below = len(ranked) - len(survivors)
        note = first.detail if first.detail != "first-stage order" else ""
        detail = "; ".join(x for x in (note, f"{below} below rerank {self.rerank_threshold:g}" if below else "") if x)
        return Selection(survivors, "ok", detail or f"reranked by {self.reranker.name}")


def unasked_later(passages: list[Passage], query: str, message: str) -> list[Passage]:
    """``passages`` reordered by score, each that is only table rows none of whose keys ``query`` names scaled by
    :data:`UNASKED_TABLE`, each of a release-notes page scaled by :data:`UNASKED_RELEASE_NOTES` unless ``message``
    asks about versions or changes (ties keep their order)."""
    wanted = content_set(query)
    changes_asked = bool(_ASKS_CHANGES.search(message))
    factors = [
        (UNASKED_TABLE if wanted and unasked_table(p.text, wanted) else 1.0)
        * (UNASKED_RELEASE_NOTES if not changes_asked and release_notes(p.source) else 1.0)
        for p in passages
    ]
    if all(f == 1.0 for f in factors):
        return passages
    scaled = [p.score * f for p, f in zip(passages, factors, strict=True)]
    return [passages[n] for n in sorted(range(len(passages)), key=lambda n: (-scaled[n], n))]


def release_notes(source: str) -> bool:
    """The page is release notes by its path or URL: a changelog, a "what's new" page, a release-notes section."""
    return bool(_RELEASE_PAGE.search(source))


def unasked_table(text: str, wanted: frozenset[str]) -> bool:
    """Every line of ``text`` is a table row, and no row's key (its first cell: `per_stream_rate_limit`,
    `entryPoints.web.http.redirections`) shares a word with ``wanted``, the key read whole or as the parts of its
    name as written. The parts are not stemmed as the query's words are, so "retention" does not name
    `retention_period` (measured: stemming them gave back the gain, as "default" then names `defaults.command`
    and "pod" `podManagementPolicy`; docs/benchmarks.md)."""
    if not only_table(text):
        return False
    _, rows = table_lines(text)
    keys = " ".join(table_cells(row)[0] for row in rows)
    named = content_set(keys) | set(_NAME_BREAK.split(keys.lower()))
    return not wanted & named
