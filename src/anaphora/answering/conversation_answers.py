"""Answers to turns about the conversation, made from the history alone: no retrieval, no model call.

Pure functions over the recent messages: shorten or repeat an earlier answer, point back to one thing said ("the
first command you gave me", "the second step"), recap the conversation within the length the user gave, and a short
reply to thanks or a greeting. Every word of an answer comes from the assistant's earlier answers (the citation
markers left out: their passages are not shown on this turn), so nothing is invented.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from anaphora.answering.said_names import identifiers, of_kind
from anaphora.answering.support import (
    Unit,
    introduces,
    refers_back,
    risky_tokens,
    split_units,
    table_cells,
    table_lines,
    without_item_mark,
)
from anaphora.reading.intents import ConversationRequest, Intent
from anaphora.reading.message import read
from anaphora.reading.personal import AS_YOU_SAID
from anaphora.text import content_set, named_words
from anaphora.types import Message

DEFAULT_SHORT_WORDS = 30  # "say that shorter" with no length given
DEFAULT_RECAP_WORDS = 60
STATEMENT_WORDS = 4  # fewer words state nothing (as the extractive answerer's MIN_WORDS)
BRIEF_RECAP_WORDS = 40  # "a short list", "a quick recap"
NOTHING_YET = "We have not gone through anything from the documents yet, so there is nothing to recap."
# a citation marker the answerers write: "[path/to/file.md#3]", "[memory:12]", "[a.md#1, b.md#2]"
_MARKER = re.compile(r"[ \t]?\[(?:[^\[\]\s]+#\d+|memory:[^\[\]\s]+)(?:,\s*(?:[^\[\]\s]+#\d+|memory:[^\[\]\s]+))*\]")
_CODE_SPAN = re.compile(r"`[^`\n]+`")
# a paragraph that quotes memory only (the user's facts said back): what the user said, not what the answer said
_FROM_MEMORY = re.compile(r"\[memory:[^\[\]\s]+\]\s*$")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\([^()\s]+\)")
# a block of shell commands: by its fence's language, or a session in a plain block (its first line a "$ " prompt)
_SHELL = re.compile(r"^```(?:(?:bash|sh|shell|console|zsh|powershell|cmd|terminal)?\s*$|[\w-]*\n\s*\$ )", re.M)
# a block without a language whose first line is configuration, not a command: "key: value", "key = value", a
# table header, an object or a tag
_CONFIG_LINE = re.compile(r"^```\s*\n\s*(?:[\w.\"'-]+\s*[:=](?:\s|$)|[\[{<])")


def block_of(piece: str) -> str:
    """A piece's code block without the sentence that introduced it (the piece itself when it has none)."""
    return piece[piece.find("```") :] if "```" in piece else piece


def is_command(code: str) -> bool:
    """A code block (fenced) of shell commands, or a bare command (a code span's text)."""
    if not code.startswith("```"):
        return True
    return bool(_SHELL.match(code)) and not _CONFIG_LINE.match(code)


SOCIAL_REPLIES = {
    "thanks": "You're welcome.",
    "greeting": "Hello! Ask me anything about the documents.",
    "farewell": "Goodbye!",
    "identity": "I answer questions from the documents you have added, with citations; I can also shorten, "
    "repeat or recap what I said.",
    "ack": "Glad it helps.",
}


@dataclass(frozen=True, slots=True)
class Said:
    """One earlier turn that answered from the documents: its question and its answer's units (markers out)."""

    index: int
    question: str
    units: tuple[Unit, ...]

    @property
    def text(self) -> str:
        return "".join(u.text + u.separator for u in self.units).strip()


def whole_tables(units: Iterable[Unit]) -> tuple[Unit, ...]:
    """The units with each table's lines (header, delimiter, rows) joined into one: a quoted table row is said
    back whole, never as its header line alone."""
    joined: list[Unit] = []
    for unit in units:
        last = joined[-1] if joined else None
        if last is not None and unit.kind == last.kind == "row" and last.separator.count("\n") <= 1:
            joined[-1] = Unit(f"{last.text}{last.separator}{unit.text}", unit.separator, "row")
        else:
            joined.append(unit)
    return tuple(joined)


def as_sentence(unit: Unit) -> Unit:
    """A table said as a sentence, for a gist that reads as prose: its first row's cells, the description after
    the first cell and the other columns by name ("`port`: TCP port of the instance. (Default: `9200`)")."""
    if unit.kind != "row":
        return unit
    header, rows = table_lines(unit.text)
    if not rows:  # a header or a delimiter line alone: nothing to say
        return unit
    first = table_cells(rows[0])
    names = [*(table_cells(header[0])[1:] if header else []), *[""] * len(first)]
    pairs = [(name, value) for name, value in zip(names, first[1:], strict=False) if value]
    said = " ".join(value for name, value in pairs if not name or name.lower() == "description")
    named = "; ".join(f"{name}: {value}" for name, value in pairs if name and name.lower() != "description")
    text = " ".join(part for part in (f"{first[0]}:" if first[0] and said else first[0], said) if part)
    return Unit(text + (f" ({named})" if named else ""), unit.separator, "sentence")


def row_by_row(units: Sequence[Unit]) -> list[Unit]:
    """The units with each table split back into its rows, each under the table's header: what can be pointed at
    is one row ("the port setting you mentioned"), said with what its columns are."""
    split: list[Unit] = []
    for unit in units:
        header, rows = table_lines(unit.text) if unit.kind == "row" else ([], [])
        if len(rows) > 1:
            split.extend(Unit("\n".join([*header, row]), unit.separator, "row") for row in rows)
        else:
            split.append(unit)
    return split


def without_markers(text: str) -> str:
    """The answer without its citation markers, and its links as their text (outside code blocks, where
    ``[OUTPUT]`` is code)."""
    parts = re.split(r"(```.*?(?:```|$))", text, flags=re.S)
    return "".join(p if p.startswith("```") else _LINK.sub(r"\1", _MARKER.sub("", p)) for p in parts)


def earlier_answers(history: Sequence[Message], unanswered: Sequence[str] = ()) -> list[Said]:
    """The turns of ``history`` that answered from the documents, oldest first: not chit-chat, not a request
    about the conversation, not an abstention (an answer starting with one of ``unanswered``)."""
    found: list[Said] = []
    question: str | None = None
    turn = -1
    for message in history:
        if message.role == "user":
            question, turn = message.content, turn + 1
            continue
        if message.role != "assistant" or question is None:
            continue
        answer = message.content.strip()
        if answer.startswith(AS_YOU_SAID):  # the user's own words said back, not what the answer said
            answer = answer.partition("\n\n")[2].strip()
        answer = "\n\n".join(p for p in answer.split("\n\n") if not _FROM_MEMORY.search(p)).strip()
        if answer and read(question).request is None and not answer.startswith(tuple(u for u in unanswered if u)):
            units = whole_tables(u for u in split_units(without_markers(answer)) if u.text.strip())
            if units:
                found.append(Said(turn, question, units))
        question = None
    return found


def social_reply(kind: str | None) -> str:
    return SOCIAL_REPLIES.get(kind or "ack", SOCIAL_REPLIES["ack"])


def answer_about_conversation(
    request: ConversationRequest, history: Sequence[Message], unanswered: Sequence[str] = ()
) -> str:
    """The answer to a turn about the conversation, from the assistant's earlier answers."""
    if request.intent is Intent.CHIT_CHAT:
        return social_reply(request.social)
    said = earlier_answers(history, unanswered)
    if not said:
        return NOTHING_YET
    if request.intent is Intent.RECAP:
        return recap(request, said)
    if request.intent is Intent.POINT_BACK and request.wants == "question":
        asked = [m.content for m in history if m.role == "user"]
        return f"You asked: {pick(asked, request.ordinal or -1)}" if asked else NOTHING_YET
    if request.intent is Intent.POINT_BACK and request.gather:
        return gather(request, said)
    if request.intent is Intent.POINT_BACK:
        return point_back(request, said)
    targets = about(request.topic, said) or [said[-1]]
    if request.intent is Intent.REPEAT and request.max_words is None:
        return "\n\n".join(s.text for s in targets[-1:])
    targets = without_repeats(targets)  # two answers that quoted the same sentence say it once
    budget = request.max_words or DEFAULT_SHORT_WORDS
    lines = request.lines  # "in one line": prose, no code block, no paragraph break
    shortened = [gist(s, max(4, budget // len(targets)), prose=lines is not None) for s in targets]
    shortened = [text for text in shortened if text] or [gist(targets[-1], budget)]  # only code: said as code
    if any(text.endswith("…") for text in shortened):  # whole statements rather than a fragment of each
        shortened = whole_gists(targets, max(4, budget // len(targets)), budget)
    return "\n\n".join(shortened) if lines is None else in_lines(shortened, lines)


def in_lines(texts: Sequence[str], lines: int) -> str:
    """``texts`` in order on at most ``lines`` lines, as even as they go."""
    per = -(-len(texts) // max(1, lines))
    return "\n".join(" ".join(" ".join(t.split()) for t in texts[i : i + per]) for i in range(0, len(texts), per))


def about(topic: frozenset[str], said: Sequence[Said]) -> list[Said]:
    """The earlier answers whose turn is most about ``topic`` (all those tied), oldest first."""
    if not topic:
        return []
    scores = [len(topic & named_words(f"{s.question} {s.text}")) for s in said]
    best = max(scores)
    return [s for s, score in zip(said, scores, strict=True) if best and score == best]


def word_count(text: str) -> int:
    return len(text.split())


def announces(unit: Unit) -> bool:
    """A sentence or item that announces what follows it ("Minimum required configuration:")."""
    return unit.kind in ("sentence", "item") and introduces(unit.text.rstrip())


def gist(said: Said, budget: int, *, prose: bool = False) -> str:
    """The most of one answer that fits ``budget`` words: its lead, then the units that carry identifiers
    (commands, settings, values), in their order. A lead longer than the budget is cut at a word. A lead that
    only announces what follows ("Minimum required configuration:") gives way to the answer's first statement
    that fits, when what it announces does not fit with it, and so does a code block that opens the answer (cut into
    a line, code reads as noise); an item is quoted without its list mark. ``prose``: no code at all (a recap's
    line or bullet, where a block would break the lines asked for), so a lead-in gives way too."""
    units = [as_sentence(u) for u in said.units if u.text.strip()]
    if prose and any(u.kind != "code" for u in units):
        units = [as_statement(u) for u in units if u.kind != "code"]
    opens_on_code = units[0].kind == "code"
    overlong = word_count(" ".join(u.text for u in units[:2])) > budget
    if opens_on_code or (announces(units[0]) and (prose or overlong)):
        stated = [u for u in units if u.kind in ("sentence", "item") and not announces(u) and states(u)]
        fitting = [u for u in stated if word_count(u.text) <= budget]
        if fitting or ((opens_on_code or prose) and stated):  # a block or a bare lead-in is no gist: a statement
            units = units[units.index((fitting or stated)[0]) :]
        elif prose:  # nothing but a label and what it introduced: nothing to say in prose
            return ""
    lead = units[0]
    if lead.kind == "item":
        units[0] = lead = Unit(without_item_mark(lead.text), lead.separator, "sentence")
    if word_count(lead.text) > budget:
        fits = [u for u in units[:3] if u.kind == "sentence" and not announces(u) and word_count(u.text) <= budget]
        fits = [u for u in fits if not refers_back(u.text)]  # "It also enables ..." says nothing on its own
        return fits[0].text.strip() if fits else cut(lead.text, budget)
    chosen = [0]
    if not prose and announces(lead) and len(units) > 1 and word_count(" ".join(u.text for u in units[:2])) <= budget:
        chosen.append(1)  # what it announces is part of the lead
    used = sum(word_count(units[i].text) for i in chosen)
    ranked = sorted(range(len(chosen), len(units)), key=lambda i: (-len(risky_tokens(units[i].text)), i))
    for i in ranked:
        size = word_count(units[i].text)
        if risky_tokens(units[i].text) and used + size <= budget:
            chosen.append(i)
            used += size
    return join_units([units[i] for i in sorted(chosen)])


def states(unit: Unit) -> bool:
    """The unit has words enough to state something: a link's text in a list ("Flask-specific documentation")
    names a page and states nothing."""
    return word_count(without_item_mark(unit.text)) >= STATEMENT_WORDS


def as_statement(unit: Unit) -> Unit:
    """A lead-in that names something ("you can use the `crontab` schedule type:") said as a statement, for prose
    where what it introduces is left out; a lead-in that names nothing ("For example:") stays one."""
    if not announces(unit) or not risky_tokens(unit.text) or not unit.text.rstrip().endswith(":"):
        return unit
    if not content_set(_CODE_SPAN.sub(" ", unit.text)):  # a bare label ("`flaskr/__init__.py`:") says nothing
        return unit
    return Unit(unit.text.rstrip().rstrip(":").rstrip() + ".", unit.separator, unit.kind)


def join_units(units: Sequence[Unit]) -> str:
    """Units as they were written: a code block, list item or table row on its own line."""
    text = ""
    for unit in units:
        block = unit.kind != "sentence"
        if text:
            text += "\n\n" if block or unit.kind == "code" or text.endswith("```") else " "
        text += unit.text.strip()
    return text


def cut(text: str, budget: int) -> str:
    """``text`` cut to ``budget`` words at a word, marked with an ellipsis; an open code span is closed."""
    words = text.split()
    if len(words) <= budget:
        return text.strip()
    kept = " ".join(words[: max(1, budget - 1)]).rstrip(",;:")  # the ellipsis is a word too
    if kept.count("`") % 2:
        kept += "`"
    return kept + " …"


def recap(request: ConversationRequest, said: Sequence[Said]) -> str:
    """One line per topic of the conversation (of the named topic, if the user named one; :func:`topics`), each the
    gists of its answers within its share of the words the user gave; as the number of lines asked for, or as a
    list. An answer that says again what an earlier one said (the same fact asked about twice) adds nothing: a
    recap never repeats a sentence."""
    turns = about(request.topic, said) or list(said)
    turns = [s for s in turns if any(u.kind != "code" for u in s.units)] or turns  # a config block is no gist
    turns = without_repeats(turns)
    budget = request.max_words or (BRIEF_RECAP_WORDS if request.bullets else DEFAULT_RECAP_WORDS)
    lines = request.lines  # "in three bullets" asks for three lines as much as "in three lines"
    groups = topics_in_lines(topics(turns), lines) if lines else topics(turns)
    room = budget - len(groups) if request.bullets else budget  # a bullet mark counts as a word
    share = max(3, room // len(groups))
    # each answer of a topic its part of the line; where no part holds a whole statement, the topic's line is
    # one statement of whichever answer has one that fits ("tl;dr in 30 words" after four topics)
    texts = [
        one_line(" ".join(whole_gists(g, max(3, share // len(g)), share) or whole_gists(g, share, share)))
        for g in groups
    ]
    if request.bullets:
        text = "\n".join(f"- {t}" for t in texts if t)
    else:
        text = ("\n" if lines else " ").join(t for t in texts if t)
    return trim(text, budget) if text else gist(turns[-1], budget)  # nothing but code was said: the code


def one_line(text: str) -> str:
    """A topic's gists on one line: an item said as a sentence, without its mark."""
    return " ".join(without_item_mark(line).strip() for line in text.splitlines() if line.strip())


def topics(said: Sequence[Said]) -> list[list[Said]]:
    """The answers grouped by the topic they were about, in order. An answer stays on the topic before it when its
    question carries on from it ("and how do I register it?", "what about the static files?", a pronoun) or
    shares a word with the topic's questions ("how do I test a blueprint?" after "how do I create a blueprint?");
    a question that says it leaves ("unrelated: ...") or names nothing of the topic opens another."""
    groups: list[list[Said]] = []
    topic: set[str] = set()  # the words of the current topic's questions
    everywhere = said_everywhere(said)
    for answer in said:
        reading = read(answer.question)
        if groups and (reading.refers_back or topic & (reading.words - everywhere)) and not reading.shifts_topic:
            groups[-1].append(answer)
        else:
            groups.append([answer])
            topic = set()
        topic |= reading.words
    return groups


def said_everywhere(said: Sequence[Said]) -> frozenset[str]:
    """The words more than half of the answers say (of four or more): the product's name on its own docs site
    ("Flask ..."), which every question may name and which ties no two of them to one topic."""
    if len(said) < 4:
        return frozenset()
    counts = Counter(word for answer in said for word in content_set(answer.text))
    return frozenset(word for word, n in counts.items() if 2 * n > len(said))


def topics_in_lines(groups: list[list[Said]], lines: int) -> list[list[Said]]:
    """The topics as ``lines`` lines: neighbouring topics share a line when there are more, and the topic with the
    most answers is split in two while there are fewer (a "two-line recap" of one topic)."""
    groups = [list(g) for g in groups]
    while len(groups) > lines:  # the two smallest neighbours share a line
        at = min(range(len(groups) - 1), key=lambda i: len(groups[i]) + len(groups[i + 1]))
        groups[at : at + 2] = [groups[at] + groups[at + 1]]
    while len(groups) < lines and any(len(g) > 1 for g in groups):
        at = max(range(len(groups)), key=lambda i: len(groups[i]))
        half = (len(groups[at]) + 1) // 2
        groups[at : at + 1] = [groups[at][:half], groups[at][half:]]
    return groups


def whole_gists(turns: Sequence[Said], share: int, budget: int) -> list[str]:
    """A gist of each answer in ``share`` words; where that would cut a sentence, the answer's first whole statement
    that names something (a setting, a command) within the words left, and where none fits, nothing: a recap of
    whole statements about fewer answers reads better than a fragment of each ("If this option …")."""
    found, used = [], 0
    for said in turns:
        text = gist(said, share, prose=True)
        if text.endswith("…"):
            text = whole_statement(said, min(budget - used, max(share, budget // 2))) or ""
        if text and used + word_count(text) <= budget:
            found.append(text)
            used += word_count(text)
    first = gist(turns[0], budget, prose=True) if turns else ""
    return found or ([first] if first else [])


def whole_statement(said: Said, budget: int) -> str | None:
    """The answer's first sentence or item within ``budget`` words that names something, else its first that fits;
    never one that opens by referring to the sentence before it."""
    units = [as_statement(as_sentence(u)) for u in said.units if u.text.strip() and u.kind != "code"]
    stated = [u for u in units if u.kind in ("sentence", "item") and not announces(u) and states(u)]
    fitting = [u for u in stated if word_count(u.text) <= budget]
    alone = [u for u in fitting if not refers_back(u.text)]  # "It also enables ..." says nothing on its own
    named = [u for u in alone if risky_tokens(u.text)]
    chosen = (named or alone or [None])[0]
    return without_item_mark(chosen.text).strip() if chosen is not None else None


def without_repeats(said: Sequence[Said]) -> list[Said]:
    """The answers with every sentence said once: a unit an earlier answer already said is left out, and an answer
    left with nothing new is left out whole."""
    seen: set[str] = set()
    kept: list[Said] = []
    for answer in said:
        fresh = tuple(u for u in answer.units if " ".join(u.text.lower().split()) not in seen)
        seen.update(" ".join(u.text.lower().split()) for u in answer.units)
        if any(u.kind != "code" for u in fresh) or (fresh and not kept):
            kept.append(Said(answer.index, answer.question, fresh))
    return kept or list(said[:1])


def trim(text: str, budget: int) -> str:
    """At most ``budget`` words, the line structure kept."""
    if word_count(text) <= budget:
        return text
    out, used = [], 0
    for line in text.split("\n"):
        room = budget - used
        if room <= 0:
            break
        out.append(cut(line, room) if word_count(line) > room else line)
        used += min(room, word_count(line))
    return "\n".join(out)


def point_back(request: ConversationRequest, said: Sequence[Said]) -> str:
    """The one thing pointed at: a command, a step, a named setting, or the gist of the answer the ordinal picks."""
    if request.wants == "step":  # "the second step": the ordinal counts within the latest list
        latest = next((s for s in reversed(said) if any(u.kind == "item" for u in s.units)), said[-1])
        items = [u for u in latest.units if u.kind == "item"] or [u for u in latest.units if u.kind == "sentence"]
        return pick(items, request.ordinal or 1).text.strip()
    pool = about(request.topic, said) if request.topic else list(said)
    pool = pool or list(said)
    wanted = [s for s in pool if _pieces(s, request.wants)] or pool
    if request.wants == "command" and request.topic:
        following = command_after(request.topic, pool)
        if following:  # "the step after adding it to INSTALLED_APPS, what was the command?"
            return following
    chosen = pick(wanted, request.ordinal or (1 if request.wants is None and request.topic else -1))
    pieces = _pieces(chosen, request.wants, alone=request.alone or request.max_words is not None)
    if request.wants is None and request.topic and not any(request.topic & named_words(p) for p in pieces):
        # "which exporter was it?": the thing named may be said only in the answer's config block
        pieces += [u.text.strip() for u in chosen.units if u.kind == "code" and request.topic & named_words(u.text)]
    if not pieces:
        return gist(chosen, request.max_words or DEFAULT_RECAP_WORDS)
    if request.wants == "identifier" and not request.topic:  # "which settings were in your first answer?"
        return trim("\n\n".join(pieces[:3]), request.max_words or DEFAULT_RECAP_WORDS)

    def fit(piece: str) -> tuple[int, int, int]:
        shell = request.wants == "command" and is_command(block_of(piece))
        return len(request.topic & named_words(piece)), shell, -pieces.index(piece)

    best = max(pieces, key=fit)
    names = identifiers(best) if request.wants == "identifier" and request.alone else []
    if names:  # "the enterprise token variable, nothing else": the name whose words the request says
        return max(names, key=lambda name: (len(request.topic & named_words(name)), -names.index(name)))
    if request.max_words is not None and request.max_words <= 3:
        spans = [s.strip("`") for s in _CODE_SPAN.findall(best)]
        spans += [t for t in risky_tokens(best) if "/" not in t and "<" not in t]
        return spans[0] if spans else best  # a whole sentence rather than a cut word
    return best


def gather(request: ConversationRequest, said: Sequence[Said]) -> str:
    """Every thing of the kind asked for that the answers said ("which settings did you mention?", "list the
    commands"), in the order they were first said, each once: identifiers by name, commands as written. The answers
    about the topic the request names, if any say one; the answer the ordinal picks, if it counts answers."""
    pool = about(request.topic, said) or list(said)
    if request.ordinal is not None:  # "which settings were in your first answer?": that answer's
        pool = [pick(pool, request.ordinal)]
    if request.wants == "command":
        found = [p for s in pool for p in _pieces(s, "command", alone=request.alone)]
        found = [p for p in found if is_command(block_of(p))] or found  # "list the commands": not the config
    else:
        units = [u for s in pool for u in s.units]
        prose, code = ("\n".join(u.text for u in units if (u.kind == "code") == in_code) for in_code in (False, True))
        named = [(name, u.kind == "code") for u in units for name in identifiers(u.text)]
        found = of_kind(named, request.names, prose, code)
    first: dict[str, str] = {}
    for name in found:  # each once, in the order first said, as first written
        first.setdefault(name.casefold(), name)
    unique = list(first.values())
    if not unique:
        return gist(pool[-1], request.max_words or DEFAULT_RECAP_WORDS)
    return laid_out(unique, request.layout, code=request.wants == "command")


def laid_out(items: Sequence[str], layout: str | None, *, code: bool) -> str:
    """A gathered list in the form asked for: comma-separated, one per line, a checklist, or (else) one bullet
    each; names in code spans, commands as written (a command of several lines stays a block of its own)."""
    shown = [item if code else f"`{item}`" for item in items]
    if layout == "comma" and not any("\n" in item for item in items):
        return ", ".join(shown)
    if layout == "lines" and not code:
        return "\n".join(items)
    if layout == "checklist":  # a block of several lines cannot be an item: it follows the one before it
        return "\n".join(item if "\n" in item else f"- [ ] {item}" for item in shown)
    return "\n\n".join(items) if code else "\n".join(f"- {item}" for item in shown)


def command_after(topic: frozenset[str], said: Sequence[Said]) -> str | None:
    """When no command says what the request names but a sentence of an answer does, the first command after that
    sentence in the same answer (what a "the step after X" points at); ``None`` when a command names it."""
    codes = [(s, n) for s in said for n, u in enumerate(s.units) if u.kind == "code"]
    if not codes or any(topic & content_set(s.units[n].text) for s, n in codes):
        return None
    place = max(
        ((s, n) for s in said for n, u in enumerate(s.units) if u.kind != "code"),
        key=lambda at: len(topic & content_set(at[0].units[at[1]].text)),
        default=None,
    )
    if place is None or not topic & content_set(place[0].units[place[1]].text):
        return None
    answer, start = place
    later = [n for n, u in enumerate(answer.units) if u.kind == "code" and n > start]
    return answer.units[later[0]].text.strip() if later else None


def pick(items: Sequence, ordinal: int):
    """The ``ordinal``-th item (1-based; -1 the last; 0 "the next one": the last), clamped to what there is."""
    if ordinal <= 0:
        return items[-1]
    return items[min(ordinal, len(items)) - 1]


def _pieces(said: Said, wants: str | None, alone: bool = False) -> list[str]:
    """What of an answer can be pointed at: its code (blocks, with the sentence that introduced each unless
    ``alone``, and spans) for a command, its units holding an identifier for a setting, a flag or a file, its lead
    for the answer itself."""
    if wants == "command":
        codes = [n for n, u in enumerate(said.units) if u.kind == "code"]
        blocks = [said.units[n].text.strip() if alone else with_lead_in(said.units, n) for n in codes]
        spans = [s.strip("`") for u in said.units if u.kind != "code" for s in _CODE_SPAN.findall(u.text)]
        return blocks + [s for s in spans if " " in s or "/" in s]
    if wants == "identifier":
        return [u.text.strip() for u in row_by_row(said.units) if risky_tokens(u.text)]
    return statements(said)


def with_lead_in(units: Sequence[Unit], n: int) -> str:
    """Code block ``n`` with the sentence that introduced it in the answer, if one did ("Run the following command
    ..., changing the architecture (`arm64` and `amd64` are supported), if needed:"): what it is for and what to
    adapt were said with it."""
    block = units[n].text.strip()
    return f"{units[n - 1].text.strip()}\n\n{block}" if n and announces(units[n - 1]) else block


def statements(said: Said) -> list[str]:
    """The answer's units other than code, in order; one that introduces what follows ("Labels:", "Run this:") comes
    with the unit it introduces, and is left out when nothing follows it: alone it says nothing."""
    found = []
    units = row_by_row(said.units)
    for n, unit in enumerate(units):
        if unit.kind == "code":
            continue
        text = unit.text.strip()
        if text.endswith(":"):
            if n + 1 == len(units):
                continue
            text = f"{text}\n\n{units[n + 1].text.strip()}"
        found.append(text)
    return found
