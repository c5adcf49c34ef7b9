"""Turns about the conversation itself, recognised by rules: shorten or repeat an answer, point back to something
said, recap the conversation, and social turns (thanks, hello, ok).

A message is about the conversation when it asks for one of these (a *cue*: "shorter", "recap", "again", "you
said") **and** brings no topic of its own: what is left once the cue, the request's own words ("version", "line",
"please") and the length the user asks for are taken out must be nothing, or be what the cue points at ("say the
backup part again, shorter"). A message that asks something of the documents ("how do I shorten the retention
window?", "summarize the upgrade guide") keeps its topic words and goes to retrieval. The rules are measured on a
labelled set with a held-out part (``tests/data/conversation_intents.jsonl``, ``bench/intents.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache

from anaphora.text import content_set


class Intent(StrEnum):
    CHIT_CHAT = "chit_chat"
    SHORTEN = "shorten"  # the previous answer (or the one about a topic), shorter
    REPEAT = "repeat"  # the previous answer again
    POINT_BACK = "point_back"  # one thing said earlier: "the first command you gave me", "the second step"
    RECAP = "recap"  # the whole conversation


@dataclass(frozen=True, slots=True)
class ConversationRequest:
    """What a turn about the conversation asks for. ``max_words``: the length the user gave ("in 30 words", "two
    lines"), if any; ``lines``: how many lines or sentences; ``bullets``: a list was asked for; ``ordinal``: which
    one ("first" 1, "second" 2, "last" -1); ``wants``: the kind of thing pointed at ("command", "step", ...);
    ``topic``: stemmed content words that say what it is about ("the access-log part": access, log);
    ``social``: for chit-chat, which kind (thanks, greeting, farewell, identity, ack); ``alone``: the thing pointed at
    is wanted without what was said around it ("just the query please", "only the command"); ``gather``: every
    thing of that kind said so far is wanted, not one ("which settings did you mention?", "list the commands");
    ``layout``: the list form asked for, if any: "comma" (comma-separated), "lines" (one per line, nothing around
    them), "checklist" (as a checklist), else ``None`` (bullets); ``names``: for a request for names, the kind its
    noun asks for: "setting" (settings, keys, flags, variables), "code" (functions, methods), "class", "file"
    (files, paths, URLs), else ``None`` (any name: "the names", "the values"); ``tentative``: the form asks about the
    conversation but the message names a topic of its own ("in one line: what goes in mise.toml for the venv bit?"):
    it is about the conversation only if the conversation already said that topic, which the words alone cannot
    tell (:func:`topic_said` decides, with the history)."""

    intent: Intent
    max_words: int | None = None
    lines: int | None = None
    bullets: bool = False
    ordinal: int | None = None
    wants: str | None = None
    topic: frozenset[str] = field(default_factory=frozenset)
    social: str | None = None
    alone: bool = False
    gather: bool = False
    layout: str | None = None
    names: str | None = None
    tentative: bool = False

    @property
    def is_meta(self) -> bool:
        return self.intent is not Intent.CHIT_CHAT and not self.tentative


# -- social turns -------------------------------------------------------------------------------------------------
_SOCIAL_KINDS = {
    "thanks": r"thank u|thanks?( you)?( (so|very) much| a (lot|bunch|ton|million|heap)| heaps| loads| again)?|thx|"
    r"tysm|ty|ta|cheers|much appreciated|"
    r"appreciate( it| that)|many thanks|you('re| are) a lifesaver|lifesaver",
    "greeting": r"hi|hello|hey|hiya|howdy|good (morning|afternoon|evening)|morning|evening",
    "farewell": r"bye|goodbye|good night|see you( later| soon)?|later|have a (nice|good|great) (day|one|evening)",
    "identity": r"how are you( doing)?|who are you|what can you do|what are you",
    "ack": r"good to know|nice to know|great( stuff)?|awesome|perfect|cool|nice( one)?|neat|wow|brilliant|fantastic|"
    r"excellent|sweet|hmm+|interesting|"
    r"ok(ay)?|k|alright|all right|got it|gotcha|got you|i see|ah+|oh+|fair enough|"
    r"roger( that)?|will do|makes sense|understood|sounds good|noted|sure( thing)?|yes|yep|yeah|"
    r"no|nope|no problem|lol|please|mate|all good( now)?|that did (it|the trick)|that works|it works( now)?|"
    r"that'?s (exactly )?what i needed|(that )?clears (it|that) up|(that )?helps( (a lot|a bunch|so much))?|"
    r"(that )?helped|(that('s| is| was) )?(very |really |super |so )?(helpful|useful|clear|great|perfect|nice|"
    r"better|way better|much better)|you('re| are) (the best|great|awesome)|that'?s (it|great|better)",
}
_SOCIAL = re.compile(r"\b(?:" + "|".join(f"(?P<{k}>{v})" for k, v in _SOCIAL_KINDS.items()) + r")\b")
# a remark that comes with thanks or an ack: "that's already way better than what we had"
_REMARK = re.compile(r"\b(than|what|we|had|already|now|way|so|really|super|it|that|this|is|was|but|and|just)\b")


# a remark on what was said: "that's less scary than I thought", "this is way better"; never a question
_REMARK_CLAUSE = re.compile(r"^\s*(that'?s|that (is|was)|this (is|was)|so)\b[^?\d`]*$")


def is_chit_chat(message: str) -> bool:
    """Only social phrases: at least one, and nothing of substance besides ("thanks, and on ARM?" is not)."""
    return _social_kind(_normal(message)) is not None


def without_social(message: str) -> str:
    """The message, lower case, without its social phrases: "ok, fixed size then" names a size, not "ok"."""
    return " ".join(_SOCIAL.sub(" ", _normal(message)).split())


def _normal(message: str) -> str:
    """Lower case with single spaces: the rules are written in lower case (a case-blind pattern is 2-3x slower)."""
    return " ".join(message.replace("\u2019", "'").lower().split())


@lru_cache(maxsize=2048)
def _social_kind(message: str) -> str | None:
    found = [m.lastgroup for m in _SOCIAL.finditer(message)]
    kinds = [k for k in found if k]
    if not kinds or ("?" in message and kinds[0] != "identity" and not _only_social(message)):
        return None
    if not _only_social(message):
        return None
    for kind in ("thanks", "farewell", "identity", "greeting"):
        if kind in kinds:
            return kind
    return "ack"


def _only_social(message: str) -> bool:
    """Every clause is a social phrase or a remark about the answer ("that's less scary than I thought")."""
    for clause in re.split(r"[.!,;]+", _SOCIAL.sub(" ", message)):
        if content_set(_REMARK.sub(" ", clause)) and not _REMARK_CLAUSE.match(clause):
            return False
    return True


# -- requests about the conversation ----------------------------------------------------------------------------
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100,
}  # fmt: skip
_ORDINALS = {
    "first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4, "fifth": 5,
    "last": -1, "previous": -1, "latest": -1, "final": -1,
}  # fmt: skip
LINE_WORDS = 20  # what one line or sentence of a recap may hold
BULLET_WORDS = 12
_COUNT = r"(?P<n>\d{1,3}|" + "|".join(_NUMBERS) + r")"
_LENGTH = re.compile(
    r"\b" + _COUNT + r"[- ]?(?P<unit>words?|lines?|liners?|sentences?|bullets?( points?)?|points?|paragraphs?)\b"
)
_STEP_NUMBER = re.compile(r"\b(step|item|point|option|command) (?P<n>\d{1,2})\b")
_ORDINAL = re.compile(r"\b(?P<o>" + "|".join(_ORDINALS) + r"|next)\b")

_SHORTEN = re.compile(
    r"\b(shorter|briefer|shorten|condense|more concise|concisely|tl;? ?dr|in a nutshell|(the )?gist|boil (it|that|"
    r"this) down|fewer words|less detail|short version|briefly|brief|keep it short|cut (it|that|this) down|"
    r"key points?|essentials|sum (that|it|this) up|one[- ]liner|too long|squeeze|compress)\b"
)
_REPEAT = re.compile(
    r"\b(say (that|it|this) (again|once more|one more time)|repeat|come again|once more|one more time|"
    r"(show|paste|give) (me )?(that|it|this|your \w+ answer) again|go back to what|missed that|rephrase|reword|"
    r"put (it|that|this) (another|a different) way|(say|explain|put) (it|that|this) differently|in other words)\b"
)
_RECAP = re.compile(
    r"\b(summari[sz]e|summary|recap|sum up|sum it all up|wrap up|overview|takeaways|main points|notes version)\b"
)
# the assistant's words as the object of the request ("what you told me", "your last answer", "did you say")
_YOU_SAID = re.compile(
    r"\b(did|have) (you|u)( just)? (say|give|tell|mention|suggest|recommend|list|show|point|write|describe|quote|"
    r"mean|name|use|call|bring|cover|throw|touch)\b|"
    r"(?<!\bif )(?<!\bwhen )(\byou|(?<![-\w])u)('ve| have)?( just)? (said|gave|told|mentioned|"
    r"suggested|recommended|listed|showed|shown|pointed|wrote|written|described|quoted|meant|named|used|called)\b|"
    # any other thing the assistant has done with words: "you've thrown at me", "you brought up", "you covered"
    # (not a verb that only looks past: "do you need", "you embed")
    r"(?<!\bif )(?<!\bwhen )(?<!\bdo )(?<!\bdid )(?<!\bcan )\byou('ve| have)?( just)? "
    r"(?!(?:need|feed|embed|speed|proceed|exceed|succeed)\b)\w+(ed|en|wn|ght|aid|ade|one|ent)\b|"
    r"\byour( very)? ((first|last|previous|earlier|original|second|latest) )?"
    r"(answer|reply|response|message|suggestion|example|snippet|command)s?\b|\bremind me\b"
)
# the user's own earlier messages: "what was my first question?", "what did I ask before?"
_I_ASKED = re.compile(
    r"\b(my|i) ((very )?(first|last|previous|earlier|original|second|third) )(question|message)\b|"
    r"\bwhat (did|have) i (ask|asked|say|said|write|wrote)\b"
)
# "the backup part", "the bit about certificates": a piece of what was said
_PART = re.compile(r"\b(part|bit|section|piece)( about| on| with)?\b")
# the whole conversation as the object ("tl;dr of the whole thing": of every topic, not the last answer)
_CONVERSATION = re.compile(
    r"\b((our|this|the whole|the) (conversation|chat|discussion|thread|session)|of the (whole|entire) (thing|lot)|"
    r"it all|so far|everything( (above|we|"
    r"so far))?|all (of )?(that|this|the above|of it)|the above|we('ve)? (discussed|discuss|talked|talk|covered|"
    r"cover|changed|change|did|do|decided|decide|went|came|settled|settle|agreed|agree|touched|set up|"
    r"configured|looked)|"
    r"today'?s? (session|chat))\b"
)
_AGAIN = re.compile(
    r"\b(again|earlier|before|previously|at the (very )?(start|beginning)|from the (very )?(start|beginning)|"
    r"from before|to begin with|once more|came up|come up|scroll(ed)? back|up (above|there)|today)\b"
)
# how the answer is to be shaped, which names no topic: a limit ("60 words max"), a list form ("one per line",
# "comma-separated", "as a checklist"), the thing alone ("names only", "just that bit", "nothing else")
_SHAPE = re.compile(
    r"\b(max|maximum|tops|at most|or (less|fewer))\b|\b(is|would be|'d be|will do) (fine|ok|okay|great|good|"
    r"perfect|enough)\b|\b(one|each) (per|a) line\b|\bcomma[- ]?separated\b|"
    r"\bas an? (\w+ )?(checklist|list|table|one[- ]liner)\b|\b(\w+s) only\b|\bbare \w+\b|\bnothing else\b|"
    r"\bno (explanation|prose|commentary|extra \w+)\b|"
    r"\b(just|only) (that|the|those|these) (bit|part|one|snippet|path|line|value|name|block)s?\b"
)
_WAS = re.compile(r"\b(was|were|did)\b")
_WH_WAS = re.compile(r"^\W*(\w+,? )?(what|which)\b.*\b(was|were|did)\b")
_POINTER = re.compile(r"\b(that|it|this|those|these)\b")
# a question put to the documents: a question of its own unless it also points at what was said
_ASKS_DOCS = re.compile(
    r"^\W*(\w+[,!]?\s+)?(how (do|can|does|should|would|to)|can (i|we|it|you list)|does|is there|are there|"
    r"where|why|should|which (one|command|option|setting)s? (is|are|do|does|should)|when)\b"
)
_CLAUSES = re.compile(r"[:;,.?!]\s+|\s+-+\s+")  # a question may follow a pointer: "back to that flag: does it ...?"
_WANTS = {
    "command": r"commands?|query|queries|snippet|code|config(uration)?|example|line i (should|need to) run",
    "step": r"steps?|items?|points?|ones?(?! (per|a|each) line)|options?|bullets?",
    "identifier": r"flags?|switch(es)?|settings?|options?|values?|defaults?|names?|variables?|env|urls?|paths?|files?|"
    r"ports?|endpoints?|headers?|labels?|packages?|keys?|parameters?|fields?|"
    # the names of code: an API's reference is what a docs site documents most
    r"functions?|methods?|class(es)?|modules?|decorators?|hooks?|signals?|attributes?|arguments?|properties|objects?",
}
_WANTED = {kind: re.compile(rf"\b({pattern})\b") for kind, pattern in _WANTS.items()}
# the kind of name a noun of an "identifier" request asks for; the other nouns ("names", "values") ask for any
_NAME_KINDS = {
    "setting": r"flags?|switch(es)?|settings?|options?|variables?|env|keys?|parameters?|fields?",
    "class": r"class(es)?|types?",
    "code": r"functions?|methods?|decorators?|hooks?|signals?",
    "file": r"files?|paths?|urls?|endpoints?",
}
_NAMED = {kind: re.compile(rf"\b({pattern})\b") for kind, pattern in _NAME_KINDS.items()}
# a request to show something again: "paste the permissions command again", "give me that flag again"
_SHOW = re.compile(r"^\W*(\w+,? )?(show|paste|give|send|print|share|post|drop)\b")
# a question in the past tense about a thing said: "what was the command?", "which flag was it?"
_WAS_THE = re.compile(
    r"\b(what|which) (was|were) (the|that|those) (\w+ )?(" + "|".join(_WANTS.values()) + r")\W*$|"
    r"\b(which|what) (\w+ )?(" + "|".join(_WANTS.values()) + r") (was|were) (it|that|those)\W*$"
)
# words that say how the request is put, not what it is about
_REQUEST_WORDS = content_set(
    """say said tell told give gave show showed repeat mention mentioned suggest suggested recommend recommended list
    listed write wrote describe described remind summary summarize summarise recap sum wrap overview version short
    shorter brief briefly quick quickly concise answer reply response message please thing things part bit stuff
    line lines sentence sentences word words bullet bullets point points paragraph notes note team today session
    whole thread plan key main takeaways exact exactly just only again earlier before previous previously first second
    third last next final latest start one ones step steps item items option options setting settings command
    commands value values called name named call way much less detail details version gist essentials nutshell
    cut down keep make fewer form get want need needed conversation chat discussion everything together
    squeeze compress condense boil long long-winded lot wall text copy paste back go missed sorry come once
    more time hey ok okay could can would like kindly possible mate use used really decide decided settle settled
    agreed change changed cover covered talk talked discussed discuss went came touched set configured looked
    my me i you your we our us it that this there here above what which a an one two three four five six seven
    eight nine ten twenty thirty fifty hundred single enumerate itemize"""
)


# the thing pointed at without its context: "just the query please", "only the command", "nothing else"
_ALONE = re.compile(
    r"\b(just|only)( give me)?( the| that| your)? (\w+ )?(query|command|snippet|code|line|one|bit)s?\b|"
    r"\b(query|command|snippet|code) only\b|\bnothing else\b"
)
# every request below needs one of these (or shorten / repeat / recap): without them a message asks the documents
_POINTING = (_I_ASKED, _YOU_SAID, _CONVERSATION, _AGAIN, _LENGTH, _ORDINAL, _STEP_NUMBER, _WAS_THE, _SHAPE)


def points_at_answer(message: str) -> bool:
    """The message names what the assistant said ("does any of what you told me change?", "your last answer"):
    it carries on from the conversation, whatever else it asks."""
    return bool(_YOU_SAID.search(_normal(message)))


def _length(message: str) -> tuple[int | None, int | None, bool]:
    """(max words, lines, bullets) the message asks for."""
    bullets = bool(re.search(r"\b(list|bullets?|bullet points?)\b", message))
    match = _LENGTH.search(message)
    if match is None:
        return None, None, bullets
    count = match.group("n").lower()
    n = int(count) if count.isdigit() else _NUMBERS[count]
    unit = match.group("unit").lower()
    if unit.startswith("word"):
        return n, None, bullets
    if unit.startswith(("bullet", "point")):
        return n * BULLET_WORDS, n, True
    if unit.startswith("paragraph"):
        return n * 4 * LINE_WORDS, None, bullets
    return n * LINE_WORDS, n, bullets


_LAYOUTS = {
    "comma": re.compile(r"\bcomma[- ]?separated\b|\b(in|on) (one|a single) line\b"),
    "lines": re.compile(r"\b(one|each) (per|a|on its own) line\b|\bper line\b"),
    "checklist": re.compile(r"\b(check ?list|to-?do list)\b"),
}


def _layout(message: str) -> str | None:
    """The list form the message asks for ("comma-separated", "one per line", "as a checklist"), if any."""
    return next((name for name, pattern in _LAYOUTS.items() if pattern.search(message)), None)


def _ordinal(message: str) -> int | None:
    numbered = _STEP_NUMBER.search(message)
    if numbered:
        return int(numbered.group("n"))
    match = _ORDINAL.search(message)
    if match is None:
        return None
    word = match.group("o").lower()
    return 0 if word == "next" else _ORDINALS[word]  # 0: the one after the last pointed at


_MODIFIER = re.compile(
    r"\b(for|of|about|from|in|on|behind) (the |that |this |those |these |your |my |our )?([\w-]+ ){0,2}\w+$"
)


def _wants(message: str, ordinal: int | None = None) -> str | None:
    """The kind of thing pointed at, by the noun that heads the phrase: the last kind named ("the configuration
    keys" asks for keys, "the step ..., what was the command?" for a command). A noun of two kinds ("option") is a
    step when an ordinal counts it ("the second option") and a name otherwise ("the channel option")."""
    found = [(m.end(), kind) for kind, pattern in _WANTED.items() for m in pattern.finditer(message)]
    # a noun in a phrase that says which one ("the variable names for that on-prem option") heads nothing
    heads = [f for f in found if not _MODIFIER.search(message[: f[0]])] or found
    if not heads:
        return None
    end = max(heads)[0]
    kinds = {kind for at, kind in heads if at == end}
    if kinds == {"step", "identifier"}:
        return "step" if ordinal is not None else "identifier"
    return max(heads)[1]


def _name_kind(message: str) -> str | None:
    """The kind of name the request's last noun for names asks for ("the config keys" a setting, "the functions
    and methods" code, "the settings, bare names" a setting), if it asks for one kind."""
    nouns = [(m.end(), m.start()) for m in _WANTED["identifier"].finditer(message)]
    # "the file names", "the settings, bare names": another noun says which names
    nouns = [(end, start) for end, start in nouns if message[start:end] not in ("name", "names")] or nouns
    if not nouns:
        return None
    end, start = max(nouns)
    return next((kind for kind, pattern in _NAMED.items() if pattern.fullmatch(message, start, end)), None)


# an ordinal that counts the answers, not the things in them
_ANSWER_ORDINAL = re.compile(r"\b(first|second|third|last|latest|previous)\s+(answer|reply|response|message)\b")


def _gathers(message: str, wants: str | None, ordinal: int | None) -> bool:
    """Every thing of the wanted kind is asked for: its noun is plural ("which settings", "the commands"), or the
    message asks to list them, and no ordinal picks one (an ordinal may pick the answer they were in: "which
    settings were in your first answer?")."""
    if wants not in ("identifier", "command") or (ordinal is not None and not _ANSWER_ORDINAL.search(message)):
        return False
    named = [m.group(0) for m in _WANTED[wants].finditer(message)]
    plural = any(n.endswith("s") and not n.endswith("ss") for n in named)
    return plural or bool(re.search(r"\b(list|enumerate)\b", message))


# where a summary is going, not what it is about: "recap the agent setup for my runbook", "... into our wiki"
_DESTINATION = re.compile(r"\b(for|into|in) (my|our) [\w-]+( [\w-]+)?(?=\s*([,.;:!?]|$))")


def _topic(message: str, summarises: bool) -> frozenset[str]:
    """The content words the request leaves: what it is about (a summary's destination is not what about)."""
    stripped = _DESTINATION.sub(" ", message) if summarises else message
    for cue in (_LENGTH, _SHAPE, _ALONE, _SHORTEN, _REPEAT, _RECAP, _YOU_SAID, _CONVERSATION, _AGAIN, _PART, _SOCIAL):
        stripped = cue.sub(" ", stripped)
    # the noun that heads the request says what kind of thing is wanted, not what about: "the variable names"
    heads = [m for p in _WANTED.values() for m in p.finditer(stripped)]
    if heads:
        head = max(heads, key=lambda m: m.end())
        stripped = stripped[: head.start()] + " " + stripped[head.end() :]
    return frozenset(w for w in content_set(stripped) if w not in _REQUEST_WORDS and not w.isdigit())


@dataclass(frozen=True, slots=True)
class _Cues:
    """What the message's form says, before its topic is weighed."""

    shorten: bool
    repeat: bool
    recap: bool
    you_said: bool
    whole: bool
    pointer: bool
    again: bool
    was_the: bool
    shaped: bool

    @property
    def transforms(self) -> bool:
        return self.shorten or self.repeat or self.recap


def _cues(text: str) -> _Cues:
    shorten, repeat, recap = (bool(p.search(text)) for p in (_SHORTEN, _REPEAT, _RECAP))
    found = (bool(p.search(text)) for p in (_YOU_SAID, _CONVERSATION, _POINTER, _AGAIN, _WAS_THE, _SHAPE))
    return _Cues(shorten, repeat, recap, *found)


@lru_cache(maxsize=2048)
def recognise(message: str) -> ConversationRequest | None:
    """The request about the conversation this message makes, or ``None`` when it asks the documents. Cached (the
    request is immutable): the route, the skip gate and the history expansion ask it of the same messages."""
    text = _normal(message)
    cue = _cues(text)
    if not cue.transforms:
        social = _social_kind(text)
        if social is not None:
            return ConversationRequest(Intent.CHIT_CHAT, social=social)
        if not any(p.search(text) for p in _POINTING):  # most messages: a question with no cue at all
            return None
    topic = _topic(text, cue.transforms or bool(_LENGTH.search(text)))
    max_words, lines, bullets = _length(text)
    if _I_ASKED.search(text):
        return ConversationRequest(Intent.POINT_BACK, max_words, lines, bullets, _ordinal(text), "question")
    # a topic of its own means the documents, unless the message points at what was said ("the backup part again",
    # "the step after adding it, what was the command?")
    pointed = cue.you_said or cue.whole or cue.again or cue.was_the or bool(_PART.search(text))
    asks_docs = any(_ASKS_DOCS.search(clause) for clause in _CLAUSES.split(text)) and not cue.whole
    room = 3 + 2 * cue.was_the  # "the step after adding it to INSTALLED_APPS, what was the command?" names where
    # a topic of its own, or a question put to the documents: about the conversation only if it said that topic
    tentative = (asks_docs and (topic or not cue.transforms)) or (topic and not pointed) or len(topic) > room
    if tentative and (not topic or (asks_docs and not cue.you_said)):
        return None  # a question put to the documents ("how do I shorten the retention window?")
    ordinal = _ordinal(text)
    unsized = _LENGTH.sub(" ", text)  # "in 30 words" names no kind and counts nothing
    wants = _wants(unsized, ordinal)
    asks_back = bool(_WH_WAS.search(text)) and (cue.again or cue.you_said or ordinal is not None)
    asks_back = asks_back and bool(wants or topic or ordinal not in (None, -1))

    def request(intent: Intent) -> ConversationRequest:
        kept, alone = (topic if pointed or tentative else frozenset()), bool(_ALONE.search(text) or cue.shaped)
        gather = intent is Intent.POINT_BACK and _gathers(unsized, wants, ordinal)
        names = _name_kind(unsized) if gather and wants == "identifier" else None
        form = {"alone": alone, "gather": gather, "layout": _layout(text), "names": names, "tentative": tentative}
        return ConversationRequest(intent, max_words, lines, bullets, ordinal, wants, kept, **form)

    single_answer = re.search(r"\byour( very)? ((last|previous|latest) )?(answer|reply|response)\b", text)
    if cue.recap and (cue.whole or not (cue.pointer or single_answer)):
        return request(Intent.RECAP)
    if cue.shorten or cue.recap:
        return request(Intent.RECAP if cue.whole else Intent.SHORTEN)
    if asks_back:
        return request(Intent.POINT_BACK)
    if max_words is not None and not (cue.you_said and wants):
        return request(Intent.RECAP if cue.whole else Intent.SHORTEN)
    if cue.whole and re.search(r"\bwhat (have|did) we\b", text):
        return request(Intent.RECAP)
    if cue.repeat or (cue.you_said and ordinal in (None, -1) and wants is None and not topic):
        return request(Intent.REPEAT)
    intent = _pointing_back(text, cue, ordinal, wants, asks_docs)
    if intent is not None:
        return request(intent)
    if (wants and (cue.shaped or cue.again)) or (cue.shaped and topic):  # "paste just the variable names, one per line"
        return replace(request(Intent.POINT_BACK), tentative=True)  # the conversation's words decide
    return None


def _pointing_back(text: str, cue: _Cues, ordinal: int | None, wants: str | None, asks_docs: bool) -> Intent | None:
    """The rules that read a message as pointing back at one thing said ("the second step?", "paste the permissions
    command again", "the step after X, what was the command?")."""
    if cue.you_said or (
        ordinal is not None and (wants or cue.again) and (cue.again or _WAS.search(text) or _bare(text))
    ):
        return Intent.POINT_BACK
    if cue.again and _WAS.search(text) and (cue.pointer or wants):
        return Intent.POINT_BACK
    if cue.again and wants and _SHOW.search(text):
        return Intent.POINT_BACK
    if wants and cue.was_the and not asks_docs:
        return Intent.POINT_BACK
    if _bare(text) and ordinal is not None:
        return Intent.POINT_BACK
    return None


def _bare(text: str) -> bool:
    """A message that is only a pointer: "the second step?", "and the next one after that?"."""
    return len(text.split()) <= 7 and bool(
        re.match(r"^\W*((and|so|ok|okay|then),? )?(the|that|what about the)\b", text)
    )
