"""How much each of a turn's queries counts when their rankings are fused: decided per turn, from the rankings.

A follow-up is retrieved with several phrasings of one need: the history-aware query (an expansion or a model
rewrite) and the user's message as typed. A fixed weight for the message is a bet tuned on some domain; here each
query's weight comes from evidence in this turn's own rankings:

- **agreement**: a list whose head the other lists also rank high is corroborated; one that retrieves a set
  nobody else finds (a rewrite that drifted, an expansion that pulled the topic elsewhere) is not. The agreement of
  list *i* is the mean, over the other lists, of the share of its top ``head`` passages found in their top
  ``depth``.
- the **message is the anchor**: it is what the user typed, so it never counts for less than the least-corroborated
  alternative, and a history-aware query outweighs it only as far as the message's own candidates back it up.

The weights are ratios of shares of passages, so no constant depends on the corpus's score scale.
"""

from __future__ import annotations

from collections.abc import Sequence

Ranking = Sequence[tuple[int, float]]

HEAD = 10  # the top of a list whose support is measured
DEPTH = 50  # how deep in the other lists support is looked for (each list's contribution to the fusion)


def support(ranking: Ranking, other: Ranking, *, head: int = HEAD, depth: int = DEPTH) -> float:
    """Share of ``ranking``'s top ``head`` passages that ``other`` has in its top ``depth``."""
    top = [key for key, _ in ranking[:head]]
    if not top:
        return 0.0
    found = {key for key, _ in other[:depth]}
    return sum(1 for key in top if key in found) / len(top)
