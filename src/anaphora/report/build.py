"""Build the report from the turn log: every user's turns over a range, read by an operator.

Nothing is kept between reports: each reads the store as it is, so a user erased before the report holds nothing
in it; the embedder it is given should write no cache either (:func:`anaphora.app.report_of` passes the one
behind the embedding cache), so no vector of a user's words outlives their erasure.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from anaphora.embeddings.base import Embedder
from anaphora.report.grouping import MIN_SIMILARITY, group
from anaphora.report.model import DownVote, GapTurn, PageCount, Report, Shares, Topic
from anaphora.report.signals import gap_of, gist, searched, share_of, topic_key
from anaphora.store.protocols import LoggedTurn, TurnLog

MAX_TURNS = 100_000
EXAMPLES = 3


@dataclass(frozen=True)
class ReportOptions:
    """``top``: topics and pages listed; ``rows``: gap and thumbs-down rows listed (newest first)."""

    top: int = 20
    rows: int = 200
    min_similarity: float = MIN_SIMILARITY
    max_turns: int = MAX_TURNS


@dataclass
class _Asked:
    """The documentation turns of the range, by search (its normalised words)."""

    turns: dict[str, list[LoggedTurn]] = field(default_factory=lambda: defaultdict(list))
    spelled: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, logged: LoggedTurn) -> None:
        text = searched(logged.turn.question, logged.turn.trace)
        key = topic_key(text)
        self.turns[key].append(logged)
        self.spelled[key][text] += 1

    def keys(self) -> list[str]:
        """Most asked first (ties by words, so a report is the same every time it is run)."""
        return sorted(self.turns, key=lambda k: (-len(self.turns[k]), k))

    def label(self, key: str) -> str:
        return min(self.spelled[key].items(), key=lambda item: (-item[1], item[0]))[0]


def _standalone(logged: LoggedTurn) -> bool:
    """The turn searched its own words (no history went into the search)."""
    return topic_key(logged.turn.question) == topic_key(searched(logged.turn.question, logged.turn.trace))


def _label(keys: list[str], members: list[LoggedTurn], asked: _Asked) -> str:
    """The search asked most as a question of its own (a reader's words, not a follow-up's resolved search);
    the search asked most when every turn of the group was a follow-up."""
    own = Counter(searched(t.turn.question, t.turn.trace) for t in members if _standalone(t))
    if own:
        return min(own.items(), key=lambda item: (-item[1], item[0]))[0]
    return asked.label(keys[0])


def _topic(keys: list[str], asked: _Asked) -> Topic:
    members = [t for k in keys for t in asked.turns[k]]
    gaps = Counter(gap_of(t.turn.trace) for t in members)
    typed = sorted(members, key=_standalone)  # follow-ups' own words first
    return Topic(
        topic=_label(keys, members, asked),
        turns=len(members),
        users=len({t.user_id for t in members}),
        follow_ups=sum(not _standalone(t) for t in members),
        refused=gaps["refused"],
        low_support=gaps["low_support"],
        searches=[asked.label(k) for k in keys],
        questions=list(dict.fromkeys(t.turn.question for t in typed))[:EXAMPLES],
    )


def _cited(logged: LoggedTurn) -> list[str]:
    return list(dict.fromkeys(c.source or c.id for c in logged.turn.citations))


def _gap_rows(topics: dict[str, Topic], asked: _Asked, rows: int) -> list[GapTurn]:
    found = []
    for key, members in asked.turns.items():
        for logged in members:
            gap = gap_of(logged.turn.trace)
            if gap is not None:
                turn = logged.turn
                found.append(
                    GapTurn(
                        conversation_id=logged.conversation_id,
                        turn_index=turn.index,
                        created_at=turn.created_at,
                        question=turn.question,
                        searched=searched(turn.question, turn.trace),
                        gap=gap,
                        topic=topics[key].topic,
                        cited=_cited(logged),
                    )
                )
    return sorted(found, key=lambda g: -g.created_at)[:rows]


def _down_votes(logged: Sequence[LoggedTurn], rows: int) -> list[DownVote]:
    found = [
        DownVote(
            conversation_id=t.conversation_id,
            turn_index=t.turn.index,
            voted_at=t.turn.feedback.updated_at,
            question=t.turn.question,
            searched=searched(t.turn.question, t.turn.trace),
            comment=t.turn.feedback.comment,
            answer=t.turn.answer,
            cited=_cited(t),
        )
        for t in logged
        if t.turn.feedback is not None and t.turn.feedback.vote == "down"
    ]
    return sorted(found, key=lambda d: -d.voted_at)[:rows]


def _shares(logged: Sequence[LoggedTurn]) -> Shares:
    counts = Counter(share_of(t.turn.trace) for t in logged)
    total = max(1, len(logged))
    return Shares(
        **{kind: counts[kind] for kind in ("documentation", "chit_chat", "meta", "statement")},
        chit_chat_share=round(counts["chit_chat"] / total, 4),
        meta_share=round(counts["meta"] / total, 4),
    )


def _pages(asked: _Asked, pages: Sequence[str], top: int) -> tuple[list[PageCount], list[str]]:
    cited: Counter = Counter()
    for members in asked.turns.values():
        for logged in members:
            cited.update(_cited(logged))
    most = [PageCount(source=s, citations=n) for s, n in sorted(cited.items(), key=lambda i: (-i[1], i[0]))]
    return most[:top], sorted(set(pages) - set(cited))


async def build_report(
    log: TurnLog,
    embedder: Embedder,
    pages: Sequence[str],
    since: float,
    until: float,
    options: ReportOptions = ReportOptions(),
) -> Report:
    """The report over ``[since, until)``; ``pages``: every ingested document's source (for the never-cited)."""
    logged = await log.logged_turns(since, until, limit=options.max_turns + 1)
    truncated = len(logged) > options.max_turns
    logged = logged[: options.max_turns]
    asked = _Asked()
    for item in logged:
        if share_of(item.turn.trace) == "documentation":
            asked.add(item)
    keys = asked.keys()
    grouping = await asyncio.to_thread(
        group, [gist(asked.label(k)) for k in keys], embedder, min_similarity=options.min_similarity
    )
    clusters: dict[int, list[str]] = defaultdict(list)
    for key, label in zip(keys, grouping.labels, strict=True):
        clusters[label].append(key)
    topic_of = {}
    for members in clusters.values():
        topic = _topic(members, asked)
        topic_of.update(dict.fromkeys(members, topic))
    topics = sorted({id(t): t for t in topic_of.values()}.values(), key=lambda t: (-t.turns, t.topic))
    gap_topics = sorted(
        (t for t in topics if t.refused + t.low_support), key=lambda t: (-(t.refused + t.low_support), t.topic)
    )
    most, never = _pages(asked, pages, options.top)
    votes = Counter(t.turn.feedback.vote for t in logged if t.turn.feedback is not None)
    return Report(
        since=since,
        until=until,
        generated_at=time.time(),
        turns=len(logged),
        users=len({t.user_id for t in logged}),
        conversations=len({(t.user_id, t.conversation_id) for t in logged}),
        shares=_shares(logged),
        votes={"up": votes["up"], "down": votes["down"]},
        grouping=grouping.method,
        truncated=truncated,
        top_topics=topics[: options.top],
        gap_topics=gap_topics[: options.top],
        gaps=_gap_rows(topic_of, asked, options.rows),
        thumbs_down=_down_votes(logged, options.rows),
        pages_cited_most=most,
        pages_never_cited=never,
    )
