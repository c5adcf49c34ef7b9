"""Answer support: is each unit of an answer (sentence, list item, code block, table row) backed by a shown passage
or by the conversation?

A unit is *supported* when (a) the share of its content words found in one source (K-precision, stemmed, stop-words
left out) reaches ``threshold``, and (b) every *risky token* in it - code, commands and flags, paths, URLs, hosts,
e-mail addresses, numbers with or without units, versions, identifiers - appears verbatim (after normalisation) in a
passage, the question or the history. The check is lexical: it cannot see a flipped negation or a swapped subject
(docs/answers.md says what ``mark`` mode shows instead).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from anaphora.answering.citations import BRACKETED
from anaphora.text import content_words, sentences, whole_word
from anaphora.types import Passage, UnitVerdict

UnitKind = Literal["sentence", "item", "code", "row"]

FENCE = re.compile(r"^\s*(```|~~~)")  # a line that opens or closes a code block
_ITEM = re.compile(r"^\s*([-*+•]|\d{1,3}[.)])\s+")
_ROW = re.compile(r"^\s*\|")
DELIMITER_ROW = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")  # a table's header / body separator line

# a line that announces what follows it: "Run this command:", "... as follows", "Use the following settings"
_INTRODUCES = re.compile(r"(:|\bas follows[.:]?|\bthe following\b.*)$", re.IGNORECASE)
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_EDGE = "()[]{}<>,;!?\"'`*“”‘’«»"
_NUMBER_GROUPS = re.compile(r"(?<=\d)[,_](?=\d{3}\b)")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")


@dataclass(frozen=True, slots=True)
class Unit:
    """A span of the answer, ``text`` without its trailing white space ``separator``."""

    text: str
    separator: str
    kind: UnitKind


def introduces(line: str) -> bool:
    """The line announces what follows it (a code block, a list, a table): quoted, it needs what it introduces."""
    return bool(_INTRODUCES.search(line))


def only_table(text: str) -> bool:
    """Every non-blank line of ``text`` is a table row."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(_ROW.match(line) for line in lines)


def table_lines(text: str) -> tuple[list[str], list[str]]:
    """A Markdown table's header lines (its first line and the delimiter under it, when there is one) and its body
    lines."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and DELIMITER_ROW.match(lines[1]):
        return lines[:2], [line for line in lines[2:] if not DELIMITER_ROW.match(line)]
    return [], [line for line in lines if not DELIMITER_ROW.match(line)]


def table_cells(line: str) -> list[str]:
    """A table line's cells; an escaped pipe (`a\\|b`, as ingestion writes one inside a cell) is a pipe."""
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


_REFERS_BACK = re.compile(
    r"^(this|these|that|those|it|they|such|therefore|thus|hence|otherwise|additionally|also|then|however)\b",
    re.IGNORECASE,
)


def refers_back(sentence: str) -> bool:
    """The sentence opens by referring to the one before it ("It also enables ...", "Therefore, ..."): alone, it
    does not say what it is about."""
    return bool(_REFERS_BACK.match(without_item_mark(sentence).lstrip()))


def without_item_mark(text: str) -> str:
    """A list item's text without its mark ("- ", "2. ")."""
    return _ITEM.sub("", text, count=1)


def split_units(text: str) -> list[Unit]:
    """Sentences, list items, fenced code blocks and table rows, in order. Joining ``text + separator`` of every
    unit gives back ``text``. Splitting is prefix-stable: the units of a prefix, but its last, are units of the
    whole - which lets a stream release each unit as soon as the next one starts."""
    units: list[Unit] = []
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        line = lines[index]
        if FENCE.match(line):  # a code block, up to and including its closing fence (or the end)
            end = index + 1
            while end < len(lines) and not FENCE.match(lines[end]):
                end += 1
            block = "".join(lines[index : end + 1])
            units.append(_unit(block, "code"))
            index = end + 1
            continue
        if not line.strip():  # a blank line belongs to the unit before it
            if units:
                last = units[-1]
                units[-1] = Unit(last.text, last.separator + line, last.kind)
            else:
                units.append(Unit("", line, "sentence"))
            index += 1
            continue
        if _ITEM.match(line) or _ROW.match(line):
            units.append(_unit(line, "item" if _ITEM.match(line) else "row"))
            index += 1
            continue
        units.extend(_unit(sentence, "sentence") for sentence in sentences(line))
        index += 1
    return [u for u in units if u.text or u.separator]


def _unit(text: str, kind: UnitKind) -> Unit:
    stripped = text.rstrip()
    return Unit(stripped, text[len(stripped) :], kind)


def strip_markers(text: str, known: set[str] | None = None) -> str:
    """The text without bracketed citation markers (``[id]``, ``[a, b]``), as metrics and the check see it; with
    ``known``, only markers naming those ids (``[click me](url)`` is text)."""

    def drop(match: re.Match) -> str:
        parts = [p.strip() for p in re.split(r"[,;]", match.group(1))]
        return " " if known is None or all(p in known for p in parts) else match.group(0)

    cleaned = BRACKETED.sub(drop, text)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned)).strip()


def normalise_token(token: str) -> str:
    token = token.strip(_EDGE).rstrip(".:")
    return _NUMBER_GROUPS.sub("", token.lower())


def risky_tokens(text: str) -> list[str]:
    """Tokens a small model invents and a reader copies: anything with a digit or one of ``/ _ . = : @``, flags
    (``-n``, ``--force``), ``code spans`` and inner-capital identifiers (``DaemonSet``). Normalised."""
    found: list[str] = [normalise_token(span) for span in _CODE_SPAN.findall(text)]
    for raw in text.split():
        token = raw.strip(_EDGE).rstrip(".,:;")
        if not token:
            continue
        inner = token[1:-1]
        if (
            any(c.isdigit() for c in token)
            or any(c in inner for c in "/_.=:@\\")
            or re.match(r"^--?[A-Za-z]", token)
            or _INNER_CAPITAL.search(token)
        ):
            found.append(normalise_token(token))
    return [t for t in dict.fromkeys(found) if t]


class SourceText:
    """One source (a passage, or the conversation) prepared for look-ups."""

    def __init__(self, source_id: str | None, text: str) -> None:
        self.id = source_id
        self.words = set(content_words(text))
        self.flat = " " + _NUMBER_GROUPS.sub("", text.lower()) + " "

    def holds(self, token: str) -> bool:
        """The token occurs with no word character glued to either side (``512`` is not in ``5120``)."""
        return whole_word(token).search(self.flat) is not None


class SupportChecker:
    """Checks answer units against the shown passages and the conversation."""

    def __init__(self, passages: Sequence[Passage], conversation: Sequence[str], *, threshold: float) -> None:
        self.passages = [SourceText(p.id, f"{p.heading}\n{p.text}") for p in passages]
        self.conversation = SourceText(None, "\n".join(conversation))
        self.everything = [*self.passages, self.conversation]
        self.threshold = threshold
        self.ids = {p.id for p in passages}
        self._verdicts: dict[Unit, UnitVerdict] = {}  # a stream re-reads its finished units at every delta

    def check(self, unit: Unit) -> UnitVerdict:
        if unit not in self._verdicts:
            self._verdicts[unit] = self._judge(unit)
        return self._verdicts[unit]

    def _judge(self, unit: Unit) -> UnitVerdict:
        claim = strip_markers(unit.text, self.ids)
        words = content_words(claim)
        risky = risky_tokens(claim)
        missing = [t for t in risky if not any(source.holds(t) for source in self.everything)]
        if not words and not risky:
            return UnitVerdict(text=unit.text, kind=unit.kind, verdict="filler", precision=1.0)
        best_id, best, from_conversation = None, 0.0, False
        for source in self.everything:
            precision = sum(1 for w in words if w in source.words) / len(words) if words else 1.0
            if precision > best or (precision == best and best_id is None and source.id is not None):
                best, best_id, from_conversation = precision, source.id, source.id is None
        if missing:
            reason = "not in any source: " + ", ".join(missing[:5])
            return UnitVerdict(
                text=unit.text, kind=unit.kind, verdict="unsupported", precision=best, reason=reason, missing=missing
            )
        if best < self.threshold:
            reason = f"{best:.0%} of its words are in the best source (threshold {self.threshold:.0%})"
            return UnitVerdict(text=unit.text, kind=unit.kind, verdict="unsupported", precision=best, reason=reason)
        return UnitVerdict(
            text=unit.text,
            kind=unit.kind,
            verdict="supported",
            precision=best,
            passage_id=None if from_conversation else best_id,
            reason="from the conversation" if from_conversation else "",
        )
