"""How much each of a turn's queries counts when their rankings are fused, decided per turn from the rankings.

A follow-up is retrieved with several phrasings of one need: the main query (a history expansion or a model
rewrite; the message itself when it stands alone) and alternates (the message as typed, the expansion, a rewrite
that rides along). A fixed weight for the alternates is a bet tuned on some domain; here it is scaled, per turn, by
how sure each query's own dense ranking is of its head.

The evidence is the **head margin** of a query's dense list: the cosine similarity of its best passage minus the
mean similarity of its top ``MARGIN_DEPTH`` (a query-performance predictor in the spirit of score-distribution
methods such as NQC/WIG). A query that singles out a few passages has a large margin; a vague one ("and the
other?") finds many equally middling passages and a small margin. Cosine similarities of one embedder over one
corpus compare across queries, and the ratio of two margins carries no unit, so no constant depends on a domain's
score scale.

``weight(alternate) = prior × margin(alternate) / margin(main)``, capped at 1: an alternate gains weight when its
head is clearer than the main query's, loses it when vaguer, and never outweighs the main query (so an expansion
never outweighs a message that stands alone). ``prior`` is the setting ``alternate_query_weight``. Without margins
(BM25-only retrieval, an empty list) the alternate gets the prior.

One exception makes the stage never worse than the bare message where the evidence says so: when the message as
the user typed it is an alternate and its head is at least as clear as the main query's (a history expansion or a
rewrite that made it vaguer, typically a message that stood alone although it did not look it), the message is
retrieved alone (weight 1, every other query 0). Measured on both dev domains against the weighted fusion alone
(docs/benchmarks.md, issue 13): it removes most of the follow-ups the expansion harmed. Its mirror: when the message
leads (it stands alone) and an alternate (the topic's expansion, a rewrite that rides along) has a head less than
``TOPIC_CLARITY`` times as clear, or no margin to compare (BM25-only retrieval), that alternate gets 0: the
conversation's words join a standalone message only where they make its head much clearer (the topic expansion
weighed by the margin ratio alone took follow-up R@5 from 0.3787 to 0.3762 on clapnq and from 0.2458 to 0.2357 on
fiqa, follow-ups harmed 1.1% -> 6.7% and 1.3% -> 6.4%; with the rule, 0.3889 and 0.2458, harmed 1.1% and 1.3%).

And whatever the weights, the message keeps a minority of the places that reach the prompt: its own best
``top_k // 2`` passages stay within the fused ``top_k`` (:func:`keep_in_head`). The history decides most of what
the model reads, but never all of it, so a wrong expansion cannot push out everything the user's own words found.
"""

from __future__ import annotations

from collections.abc import Sequence

from anaphora.types import Passage

Ranking = Sequence[tuple[int, float]]

MARGIN_DEPTH = 50  # the depth of each list in the fusion: the margin compares the head with the whole list


def head_margin(dense: Ranking, *, depth: int = MARGIN_DEPTH) -> float | None:
    """Best similarity minus the mean of the top ``depth``; ``None`` for a list too short to say."""
    scores = [score for _, score in dense[:depth]]
    if len(scores) < 2:
        return None
    return scores[0] - sum(scores) / len(scores)


SHARPNESS = 1.0  # exponent of the margin ratio (2 was measured and not adopted; docs/benchmarks.md)
CAP = 1.0  # an alternate never outweighs the lead
# how much clearer than a leading message's head an alternate's must be to join it (follow-up R@5 at 1.0 / 1.2 /
# 1.35 / 1.5 / 2.0: clapnq 0.3912 / 0.3880 / 0.3880 / 0.3889 / 0.3787, fiqa 0.2410 / 0.2437 / 0.2458 / 0.2458 / 0.2458;
# realdocs-dev answered 40 of 75 at each)
TOPIC_CLARITY = 1.5


def query_weights(margins: Sequence[float | None], prior: float, *, message: int | None = None) -> list[float]:
    """Weights for the main query (first, 1) and each alternate, from their lists' head margins; ``message``: the
    index of the user's message as typed (0 when it leads: a message that stands alone)."""
    if not margins:
        return []
    main = margins[0]
    if message and main is not None and (own := margins[message]) is not None and own >= main:
        return [1.0 if index == message else 0.0 for index in range(len(margins))]
    weights = [1.0]
    for margin in margins[1:]:
        if message == 0 and (main is None or margin is None or margin < TOPIC_CLARITY * main):
            weights.append(0.0)  # the message leads: only a head shown to be much clearer joins it
        elif main is None or margin is None or main <= 0:
            weights.append(prior)
        else:
            weights.append(min(CAP, prior * (max(margin, 0.0) / main) ** SHARPNESS))
    return weights


def keep_in_head(fused: Sequence[Passage], own: Sequence[Passage], *, head: int) -> list[Passage]:
    """``fused`` with the first ``head // 2`` passages of ``own`` (one query's own ranking) inside its first
    ``head``: each one that is not there takes one of the head's last places, and what it displaces moves down. A
    moved passage gets the score of the place it takes (ties keep this order), so the scores stay in order."""
    shown = {p.id for p in fused[:head]}
    kept = [p for p in own[: head // 2] if p.id not in shown]
    if not kept:
        return list(fused)
    moved = {p.id for p in kept}
    rest = [p for p in fused if p.id not in moved]
    place = head - len(kept)
    score = rest[place].score if place < len(rest) else rest[-1].score if rest else 0.0
    lifted = [p.model_copy(update={"score": score}) for p in kept]
    return [*rest[:place], *lifted, *rest[place:]][: max(len(fused), head)]
