"""What a turn teaches about the user, without a model: facts from patterns on the user's own words, and the
named things (entities) of the turn.

Facts come only from the user's side of the turn ("I run k3s on a Pi 4", "my chart version is 2.3.1"), never
from the assistant's, which may be wrong. Each fact has a subject ("user"), an attribute and a value; a
single-valued attribute ("my X is ...", "I live in ...") is keyed by itself, so a newer value supersedes the old;
a many-valued one ("I use ...", "I run ...") is keyed by the verb and the thing's head word, so "I run k3s 1.30"
supersedes "I run k3s 1.29" but not "I run Postgres".

Entities are products, versions, platforms and people: words with digits (``k3s``, ``2.3.1``), inner or all
capitals (``ArgoCD``, ``AWS``), and capitalised words that are not at the start of a sentence, not function words
and not used in lower case elsewhere in the same turn. A capitalised ordinary word on its own ("Great", "Thanks")
is therefore no entity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from anaphora.memory.types import EntityKind
from anaphora.text import STOPWORDS

_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\n|,\s|\s(?:and|but|because|so|which|though|although|since|when|if)\s", re.I)
_MAX_VALUE_WORDS = 8

# (pattern on the user's words, attribute, many-valued): the value is what follows, to the end of the clause
_VERB_FACTS: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple(
    (re.compile(pattern, re.I), attribute, many)
    for pattern, attribute, many in (
        (r"\b(?:i|we)(?:'m| am| are)? (?:currently |now |still )?(?:use|using|uses)\s+", "uses", True),
        (r"\b(?:i|we)(?:'m| am| are)? (?:currently |now |still )?(?:run|running|runs)\s+", "runs", True),
        (r"\b(?:i|we)(?:'ve| have)? (?:switched|moved|migrated|upgraded) to\s+", "uses", True),
        (r"\b(?:i|we) (?:have|own|'ve got|have got)\s+(?:a |an |two |three )?", "has", True),
        (r"\b(?:i|we) (?:prefer|like to use|'d rather use)\s+", "prefers", True),
        (r"\bi(?:'m| am) (?:a |an )(?!bit\b|little\b|lot\b)", "is", False),
        (r"\b(?:i|we) (?:live|am based|are based) in\s+", "lives in", False),
        (r"\b(?:i|we) work (?:at|for)\s+", "works at", False),
    )
)
_MY_FACT = re.compile(r"\b(?:my|our) ((?:[\w.+-]+ ){0,3}[\w.+-]+) (?:is|are|was set to|is set to) ", re.I)
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an|my|our|some)\s+", re.I)

_VERSION = re.compile(r"^v?\d+(?:\.\d+)+[a-z0-9-]*$|^v\d+$", re.I)
_TOKEN = re.compile(r"[A-Za-z0-9][\w.+#-]*[\w+#]|[A-Za-z0-9]")
# words capitalised in ordinary writing that name nothing by themselves
_DISCOURSE = frozenset(
    """hey hi hello thanks thank yes yeah no ok okay sure great good nice cool wow oh well so please sorry
    awesome amazing right really maybe also anyway btw lol haha""".split()
)


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    subject: str
    attribute: str
    value: str
    text: str  # the fact as a short statement


def _clause(text: str) -> str:
    """The value: from ``text``'s start to the end of its clause, at most a few words, without a leading article."""
    end = _CLAUSE_END.search(text)
    value = text[: end.start()] if end else text
    words = value.split()[:_MAX_VALUE_WORDS]
    return _LEADING_ARTICLE.sub("", " ".join(words)).strip(" \"'()")


def extract_facts(user_words: str) -> list[ExtractedFact]:
    """The facts stated in the user's own words, in order (one per attribute key)."""
    found: dict[tuple[str, str], ExtractedFact] = {}
    for pattern, attribute, many in _VERB_FACTS:
        for match in pattern.finditer(user_words):
            value = _clause(user_words[match.end() :])
            if not value or value.lower().split()[0] in STOPWORDS:
                continue
            key = f"{attribute} {value.split()[0].lower()}" if many else attribute
            found.setdefault(("user", key), ExtractedFact("user", key, value, f"the user {attribute} {value}"))
    for match in _MY_FACT.finditer(user_words):
        attribute = match.group(1).lower()
        value = _clause(user_words[match.end() :])
        if value and attribute.split()[0] not in STOPWORDS:
            found.setdefault(
                ("user", attribute), ExtractedFact("user", attribute, value, f"the user's {attribute} is {value}")
            )
    return list(found.values())


def _kind(token: str) -> EntityKind | None:
    if _VERSION.match(token):
        return "version"
    has_digit, has_alpha = any(c.isdigit() for c in token), any(c.isalpha() for c in token)
    if has_digit and has_alpha:
        return "product"
    if not has_alpha:
        return None
    letters = [c for c in token if c.isalpha()]
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return "product"
    if any(c.isupper() for c in token[1:]):
        return "product"
    return None


def extract_entities(text: str) -> list[tuple[str, EntityKind]]:
    """The named things of ``text``, in order of first mention, each once (case-folded)."""
    lowered = {t for t in _TOKEN.findall(text) if t.islower()}
    found: dict[str, tuple[str, EntityKind]] = {}
    run: list[str] = []

    def close_run() -> None:
        if run:
            name = " ".join(run)
            found.setdefault(name.casefold(), (name, "name"))
            run.clear()

    sentence_start = True
    for match in re.finditer(rf"{_TOKEN.pattern}|[.!?:\n]", text):
        token = match.group(0)
        if token in ".!?:\n":
            close_run()
            sentence_start = True
            continue
        kind = _kind(token)
        folded = token.lower()
        if kind is not None and folded not in STOPWORDS:
            close_run()
            found.setdefault(folded, (token, kind))
        elif (
            token[0].isupper()
            and not sentence_start
            and folded not in STOPWORDS
            and folded not in _DISCOURSE
            and folded not in lowered
        ):
            run.append(token)
        elif run and token[0].isupper() and folded not in STOPWORDS:
            run.append(token)  # the second word of a name that started mid-sentence ("Raspberry Pi")
        else:
            close_run()
        sentence_start = False
    close_run()
    return list(found.values())
