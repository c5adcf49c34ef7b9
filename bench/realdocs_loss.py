"""Where an answerable realdocs turn loses its gold chunk (``python bench/realdocs.py --diagnose``).

Each answerable question or follow-up is put in the first stage of the loss that applies:

- ``not_in_index``: no chunk of a gold file holds every key fact's string (ingestion dropped or split it);
- ``not_in_candidates``: no chunk of a gold file is among the first stage's candidates;
- ``not_shown``: a gold chunk is a candidate, but none reaches the answerer (the selected passages, the
  candidates of their pages and the passages around them (``extractive_neighbours``) that the extractive answerer
  also reads);
- ``fact_not_shown``: a gold chunk is shown, but the key facts are not in any shown passage (another chunk of the
  gold page holds them);
- ``answer_misses``: the facts are in a shown passage, the answer leaves one out;
- ``answered``: every key fact is in the answer.

Beside the stage, each row records the rank of the first gold chunk and of the first chunk holding every key fact
in a deep ranking (the turn's own queries, :data:`DEEP` candidates), which tells how far a bigger pool would reach.
The candidates are the ones the turn's retrieve stage returned (recorded by wrapping the retriever), not a replay.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from anaphora.answering.citations import BRACKETED
from anaphora.answering.extractive import same_page
from anaphora.types import Passage

DEEP = 200
STAGES = ("not_in_index", "not_in_candidates", "not_shown", "fact_not_shown", "answer_misses", "answered")


def visible_text(answer: str, ids: set[str]) -> str:
    """The answer without its citation markers (``[id]``, ``[a, b]`` naming known ids) and the blank before each,
    and nothing else changed: spacing inside quoted code (``- ./certs:/certs:ro``, ``"error" != ""``) stays as
    quoted, so the invented-identifier count does not see tokens the stripping made up."""

    def drop(match: re.Match) -> str:
        parts = [p.strip() for p in re.split(r"[,;]", match.group(1))]
        return "" if all(p in ids for p in parts) else match.group(0)

    return re.sub(r"[ \t]*" + BRACKETED.pattern, drop, answer).strip()


def groups_in(text: str, must: list[list[str]]) -> int:
    lowered = text.lower()
    return sum(any(alt.lower() in lowered for alt in group) for group in must)


class RecordingRetriever:
    """Wraps a retriever's ``run_many`` to keep the last turn's candidates (the bench's view of the pool)."""

    def __init__(self, retriever) -> None:
        self.retriever = retriever
        self.last: list[Passage] = []
        self.last_queries: list[str] = []
        self.last_message: str | None = None
        self._run_many = retriever.run_many
        retriever.run_many = self.run_many  # the retrieve stage holds the same object

    async def run_many(self, queries, *, limit=None, message=None, weights=None):
        found = await self._run_many(queries, limit=limit, message=message, weights=weights)
        self.last, self.last_queries, self.last_message = list(found), list(queries), message
        return found

    def reset(self) -> None:
        self.last, self.last_queries, self.last_message = [], [], None

    async def deep(self) -> list[Passage]:
        """The last turn's queries retrieved :data:`DEEP` deep (the same fusion, a longer list)."""
        if not self.last_queries:
            return []
        return await self._run_many(self.last_queries, limit=DEEP, message=self.last_message)


def first_rank(passages: Sequence[Passage], wanted) -> int | None:
    return next((n for n, p in enumerate(passages, start=1) if wanted(p)), None)


def diagnose(
    turn: dict,
    selected: Sequence[Passage],
    candidates: Sequence[Passage],
    deep: Sequence[Passage],
    recall: float,
    around: Callable[[Sequence[Passage]], tuple[list[Passage], list[int]]] | None = None,
) -> dict:
    """The loss stage of one answerable question/follow-up and the ranks behind it. ``around``: the passages
    around the shown ones the answerer also reads (``ExtractiveAnswerer.around``)."""
    gold, must = set(turn["gold_files"]), turn["must"]

    def is_gold(p: Passage) -> bool:
        return p.source in gold

    def holds_facts(p: Passage) -> bool:
        return is_gold(p) and groups_in(f"{p.heading}\n{p.text}", must) == len(must)

    shown = [*selected, *same_page(candidates, selected)]
    shown += around(shown)[0] if around is not None else []
    shown_text = "\n".join(p.text for p in shown)
    row = {
        "gold_rank_candidates": first_rank(candidates, is_gold),
        "gold_rank_deep": first_rank(deep, is_gold),
        "fact_rank_deep": first_rank(deep, holds_facts),
        "gold_shown": any(is_gold(p) for p in shown),
        "facts_shown": groups_in(shown_text, must) / len(must) if must else None,
        "shown": [p.id for p in shown],
    }
    if not must:
        stage = None
    elif recall == 1.0:
        stage = "answered"
    elif row["gold_rank_candidates"] is None:
        stage = "not_in_candidates"
    elif not row["gold_shown"]:
        stage = "not_shown"
    elif row["facts_shown"] < 1.0:
        stage = "fact_not_shown"
    else:
        stage = "answer_misses"
    row["loss"] = stage
    return row


def mark_unindexed(rows: list[dict], facts_indexed: dict[tuple[str, int], bool]) -> None:
    """A turn whose key facts no gold chunk holds together is lost at ingestion, whatever came after."""
    for row in rows:
        if row.get("loss") not in (None, "answered") and not facts_indexed.get((row["conversation"], row["turn"])):
            row["loss"] = "not_in_index"


def facts_indexed(components, conversations: list[dict]) -> dict[tuple[str, int], bool]:
    """(conversation, turn) → whether some chunk of a gold file holds every key fact (heading and text; a fact the
    user stated, the tenant name of a turn that refers to it, counts as held)."""
    keys, _ = components.corpus.keys_and_texts()
    chunks = components.corpus.chunks([int(k) for k in keys]).values()
    by_source: dict[str, list[str]] = {}
    for chunk in chunks:
        by_source.setdefault(chunk.source, []).append(f"{chunk.heading}\n{chunk.text}")
    found = {}
    for conversation in conversations:
        for index, turn in enumerate(conversation["turns"]):
            if turn["gold_files"] and turn["must"]:
                stated = " ".join(conversation["turns"][i]["user"] for i in turn.get("refers_to", []))
                texts = [f"{stated}\n{t}" for source in turn["gold_files"] for t in by_source.get(source, [])]
                found[(conversation["id"], index)] = any(groups_in(t, turn["must"]) == len(turn["must"]) for t in texts)
    return found


def loss_table(rows: list[dict]) -> dict:
    """Turns per loss stage, overall and per corpus, and how deep the gold and fact chunks sit."""
    scored = [r for r in rows if r.get("loss")]
    table: dict = {"overall": dict(Counter(r["loss"] for r in scored))}
    for corpus in sorted({r["corpus"] for r in scored}):
        table[f"corpus:{corpus}"] = dict(Counter(r["loss"] for r in scored if r["corpus"] == corpus))
    for key in ("gold_rank_deep", "fact_rank_deep"):
        ranks = [r[key] for r in scored]
        table[key] = {
            f"<= {depth}": sum(1 for x in ranks if x is not None and x <= depth) for depth in (5, 10, 25, 50, 100, DEEP)
        } | {"missing": sum(1 for x in ranks if x is None), "n": len(ranks)}
    return table
