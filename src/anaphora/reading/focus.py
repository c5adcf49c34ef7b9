"""What a question asks for, beside its topic: a procedure (what to type) or an amount (how much, how long, the
default). The extractive answerer weighs the units that answer it (:mod:`anaphora.answering.extractive`)."""

from __future__ import annotations

import re

# a question that asks for a procedure or what to type: "how do I turn on retention?", "how to enable TLS", "what do
# I set?", "what would the config look like?", "show me an example"
_HOW = re.compile(
    r"\bhow (do|can|should|would) (i|we|you)\b|\bhow to\b|"
    r"\bwhat (do|should) (i|we) (set|add|change|put)\b|"
    r"\b(config|configuration|yaml|toml|values|command|snippet|example|file)s?\b[^?.]*\blooks? like\b|"
    r"\bshow me (the|an?|that) (config|configuration|example|command|snippet|yaml)\b",
    re.I,
)
# a question that asks for an amount ("how far can I push it?", "how long until it's gone?", "what's it set to out
# of the box?", "how many teams?"): a unit that states a quantity answers it
_AMOUNT = re.compile(
    r"\bhow (far|much|many|long|big|large|high|low|often|fast|soon)\b|\bout of the box\b|\bset to\b|"
    r"\bdefault (value|setting|size|limit)s?\b|"
    r"\bwhat(?:'s| is) the (limit|maximum|minimum|max|min|value|size|timeout|interval)\b",
    re.IGNORECASE,
)


def asks_how(question: str) -> bool:
    """The question asks for a procedure ("how do I turn on retention?"): what to type answers it, so a sentence
    that introduces a code block counts as quoting code twice."""
    return bool(_HOW.search(question))


def asks_amount(question: str) -> bool:
    """The question asks how much, how long or what a setting is set to: a unit that states a quantity ("no higher
    than 5MB", "2h by default", "32 teams") is worth as much more as one that quotes code."""
    return bool(_AMOUNT.search(question))
