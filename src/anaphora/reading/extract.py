"""What a turn teaches about the user, without a model: facts from patterns on the user's own words, and the
named things (entities) of the turn.

Facts come only from the user's side of the turn ("I run k3s on a Pi 4", "my chart version is 2.3.1"), never
from the assistant's, which may be wrong. Each fact has a subject ("user"), an attribute and a value; a
single-valued attribute ("my X is ...", "I live in ...") is keyed by itself, so a newer value supersedes the old;
using a thing ("I use ...", "I run ...", "we're on ...", "we upgraded to ...") is keyed by the thing's head word, so
"I run k3s 1.30" supersedes "I run k3s 1.29" but not "I run Postgres". Changes are facts too: "we switched from X
to Y" and "we don't use X any more" close X's fact with one whose value says "no longer X"; "I upgraded to 3.2",
with no name, is a bare version that the writer gives to the user's current fact with a version in it.

A user also states their setup without a first person: "the cluster runs Fluent Bit 2.1 on ARM64", "our nodes
are ARM64", "running k8s 1.29", "setup: Loki 3.x in microservices mode", "traefik sits behind an AWS NLB". These are
read only from a sentence that states (not one that asks, reports what documents, examples or an answer say, or
sets a condition), at its start, and only when the subject is the user's: a setup noun ("the cluster", "prod"), or
the sentence beginning with the thing itself ("running k8s 1.29"), or a deployment verb ("sits behind", "is hosted
on"); and, except for a possessed subject ("our nodes are ..."), only when the value names something (a product, a
version, a number), so "the cluster is slow" is no fact.

Entities are products, versions, platforms and people: words with digits (``k3s``, ``2.3.1``), inner or all
capitals (``ArgoCD``, ``AWS``), and capitalised words that are not at the start of a sentence, not function words
and not used in lower case elsewhere in the same turn. A capitalised ordinary word on its own ("Great", "Thanks")
is therefore no entity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from anaphora.text import STOPWORDS

# what an entity mention is (memory keeps them per user: :class:`anaphora.memory.types.Entity`)
EntityKind = Literal["product", "version", "platform", "person", "name"]

_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\n|,\s|\s(?:and|but|because|so|which|though|although|since|when|if)\s", re.I)
_MAX_VALUE_WORDS = 10
_WE = r"\b(?:i|we)(?:'ve| have| had)? (?:just |recently |finally |now |already )?"
_OBJECT = r"(?: (?:my|our|the|all (?:my|our|the)) (?:[\w-]+ ){0,2}?[\w-]+)?"  # "upgraded [my nodes] to ..."
_CHANGED = r"(?:switched|moved|migrated|upgraded|updated|changed)"
_USING = r"(?:use|using|uses|run|running|runs|on)"

# (pattern on the user's words, verb of the fact's text, many-valued): the value is what follows, to the end of
# the clause. Using, running, being on and having moved to a thing are one family ("uses"), keyed by the thing's
# head word, so "I run Fluent Bit 2.1" is superseded by "we upgraded to Fluent Bit 3.2" but not by "I run Postgres".
_VERB_FACTS: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple(
    (re.compile(pattern, re.I), verb, many)
    for pattern, verb, many in (
        (r"\b(?:i|we)(?:'m| am| are)? (?:currently |now |still )?(?:use|using|uses)\s+", "uses", True),
        (r"\b(?:i|we)(?:'m| am| are)? (?:currently |now |still )?(?:run|running|runs)\s+", "runs", True),
        (r"\b(?:i|we)(?:'m| am|'re| are) (?:currently |now |still )?on\s+(?=\S*[A-Za-z0-9])", "is on", True),
        (_WE + _CHANGED + _OBJECT + r" to\s+", "uses", True),
        (r"\b(?:i|we) (?:have|own|'ve got|have got)\s+(?:a |an |two |three )?", "has", True),
        (r"\b(?:i|we) (?:prefer|like to use|'d rather use)\s+", "prefers", True),
        (r"\b(?:i|we) (?:don't|do not) need\s+", "does not need", True),
        (r"\b(?:i|we) (?:don't|do not) want\s+", "does not want", True),
        (r"\bi(?:'m| am) (?:a |an )(?!bit\b|little\b|lot\b)", "is", False),
        (r"\b(?:i|we) (?:live|am based|are based) in\s+", "lives in", False),
        (r"\b(?:i|we) work (?:at|for)\s+", "works at", False),
    )
)
_FAMILY = {"uses": "uses", "runs": "uses", "is on": "uses"}  # verbs whose facts share one key per thing
# "upgraded Fluent Bit to 3.2": the thing before "to", the version after it
_CHANGED_THING = re.compile(
    _WE + _CHANGED + r" (?!(?:my|our|the|all|from|to|away)\b)(?P<thing>(?:[\w.+-]+ ){0,2}?[\w.+-]+) to "
    r"(?P<version>v?\d+(?:\.\w+)*)\b",
    re.I,
)
# "we switched from Promtail to Alloy": the old thing is no longer used, the new one is
_SWITCHED = re.compile(_WE + _CHANGED + r" (?:away )?from (?P<old>.+?) to\s+(?P<new>.+)", re.I)
# "we don't use Promtail anymore", "I'm not on 2.9 any more", "we no longer run k3s"
_STOPPED = re.compile(
    r"\b(?:i|we)(?:'re| are|'m| am)? (?:no longer|not|don't|do not|didn't|stopped)(?: \w+)?? "
    + _USING
    + r"\s+(?P<old>.+)",
    re.I,
)
# "no more Windows.", "so no more Promtail for us": a named thing (capitalised, as names are written) dropped
_NO_MORE = re.compile(r"\b(?i:no more) (?P<old>[A-Z][\w.+-]*(?: [\w.+-]+){0,2}?)(?=[.!,;]|$| for )")
# "how do I run ...", "should we use ...", "to run ...": asked or wanted, not stated
_ASKED = re.compile(
    r"\b(?:do|does|did|can|could|should|would|will|shall|might|may|must|to|how|why|whether|if)\s+$", re.I
)
_ANYMORE = re.compile(r"\s*\b(?:any ?more|any longer)\b.*$", re.I)
_TRAILING_TIME = re.compile(
    r"\s+(?:(?:last|this|next) (?:week|weekend|month|year|night)|yesterday|today|recently|now|\d+ \w+ ago)\b.*$", re.I
)
_MY_FACT = re.compile(r"\b(?:my|our) ((?:[\w.+-]+ ){0,3}[\w.+-]+) (is|are|was set to|is set to) ", re.I)
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an|my|our|some)\s+", re.I)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)

_VERSION = re.compile(r"^v?\d+(?:\.\d+)+[a-z0-9-]*$|^v\d+$", re.I)
_TOKEN = re.compile(r"[A-Za-z0-9][\w.+#-]*[\w+#]|[A-Za-z0-9]")
# words capitalised in ordinary writing that name nothing by themselves
_DISCOURSE = frozenset(
    """hey hi hello thanks thank yes yeah no ok okay sure great good nice cool wow oh well so please sorry
    awesome amazing right really maybe also anyway btw lol haha""".split()
)
_PARTICLE = re.compile(r"^\w+ed (?:on|off|in|out|up|down|over)$", re.I)  # "switched on", "locked down"
NO_LONGER = "no longer "  # how a fact's value says the thing is not used any more


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    subject: str
    attribute: str
    value: str
    text: str  # the fact as a short statement


def _clause(text: str) -> str:
    """The value: from ``text``'s start to the end of its clause, at most a few words, without a leading article
    or a trailing time ("... last week")."""
    end = _CLAUSE_END.search(text)
    value = text[: end.start()] if end else text
    value = _TRAILING_TIME.sub("", _ANYMORE.sub("", value.split(" [")[0]))  # "[7 May 2023]": a resolved date
    words = value.split()
    cut, words = len(words) > _MAX_VALUE_WORDS, words[:_MAX_VALUE_WORDS]
    while len(words) > 1 and (words[-1].lower() in STOPWORDS or words[-1].lower() in _DISCOURSE):
        if not cut and _PARTICLE.match(" ".join(words[-2:])):
            break  # a whole clause's phrasal verb: "proxy protocol v2 switched on"
        words.pop()  # cut mid-phrase ("a plain binary on a"), or a closing "btw"
    value = _LEADING_ARTICLE.sub("", " ".join(words)).strip(" \"'`")
    if value.endswith(")") and value.count(")") > value.count("("):
        value = value[:-1]
    if value.startswith("(") and value.count("(") > value.count(")"):
        value = value[1:]
    return value.strip()


def _as_written(text: str, value: str) -> str:
    """The value with the article the user wrote before it ("are a StatefulSet with ..."), for the fact's text:
    the value itself goes without it, as keys compare values."""
    article = _ARTICLE.match(text)
    if article and value and text[article.end() :].startswith(value.split()[0]):
        return article.group(0) + value
    return value


def thing_key(value: str) -> str:
    """The key of a many-valued fact: its family and the thing's head word ("uses fluent")."""
    return f"uses {value.split()[0].lower()}" if value else "uses"


def used(value: str, verb: str = "uses") -> ExtractedFact:
    return ExtractedFact("user", thing_key(value), value, f"the user {verb} {value}")


def stopped(old: str, text: str = "") -> ExtractedFact:
    """The thing is no longer used: a fact under the thing's key that supersedes the one saying it is."""
    return ExtractedFact("user", thing_key(old), f"{NO_LONGER}{old}", text or f"the user no longer uses {old}")


# a thing of the user's setup, named without a first person: "the cluster", "our nodes", "prod", "all the workers"
_SETUP_NOUN = (
    r"(?:clusters?|nodes?|hosts?|servers?|machines?|boxes|box|vms?|instances?|fleet|environments?|env|setup|stack|"
    r"infra(?:structure)?|prod(?:uction)?|staging|deployments?|workers?|managers?|ingesters?|replicas?|pods?)"
)
_SETUP_SUBJECT = rf"(?P<subject>(?:(?:the|our|my|this|these|all (?:the|our|my)|all) )?(?:[\w-]+ )?{_SETUP_NOUN})"
_SETUP_USES = re.compile(
    rf"^{_SETUP_SUBJECT} (?:is |are )?(?:currently |still |now |all )?"
    r"(?:runs?|running|uses?|using|is on|are on|runs? on)\s+",
    re.I,
)
_SETUP_IS = re.compile(rf"^{_SETUP_SUBJECT} (?P<verb>is|are|has|have) (?:all |both |currently |now )?", re.I)
# "the NLB has proxy protocol v2 switched on": a named thing of the setup (all capitals or digits) as the subject
_NAMED_IS = re.compile(
    r"^(?P<subject>(?:the|our|my) (?=[\w-]*(?:\d|[A-Z]{2}))[\w-]+) (?P<verb>is|are|has|have) (?:all |both |now )?"
)
_LEADING_THING = re.compile(r"^(?:currently |still |now |all )?(?:running|using|on)\s+", re.I)
_MARKED = re.compile(
    r"^(?:setup|context|stack|env|environment|fyi|for context|heads up|note|to be clear|correction|"
    r"i should(?:'ve| have) (?:said|mentioned)|i forgot to (?:say|mention))\s*[:,-]\s*",
    re.I,
)
_THIS_IS = re.compile(r"^(?:this|it)(?: is|'s) (?:all |just )?(?:on )?", re.I)  # "setup: this is docker swarm"
_HEDGE = re.compile(r"^(?:maybe|about|around|roughly|approximately|~)\s*", re.I)
_DEPLOYED = re.compile(
    r"^(?P<subject>(?:(?:the|our|my) )?(?:[\w.-]+ ){0,2}?[\w.-]+) (?P<verb>sits behind|is behind|runs behind|"
    r"lives on|lives in|is hosted (?:on|at|by|with)|is deployed (?:on|to|with|via)|"
    r"is installed (?:with|via|from|on))\s+",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n+|;\s*|,?\s+(?:and|but)\s+(?=(?:the|our|my|all)\b)", re.I)
_DISCOURSE_LEAD = re.compile(r"^(?:(?:ok|okay|so|also|and|but|btw|oh|well|oh wait|wait|anyway|fwiw)\b[,:]?\s*)+", re.I)
# a sentence that asks, relays what documents, examples or answers say, or sets a condition, states no setup
_NOT_STATED = re.compile(
    r"\?|^(?:how|what|which|why|where|when|who|can|could|would|should|is|are|does|do|did|will|has|have|if|"
    r"unless|whether)\b|\b(?:docs?|documentation|example|examples|guide|tutorial|blog|readme|page|"
    r"according to|says|said|suggests?|recommends?|by default|defaults?|you)\b|"
    r"\b(?:oom|oomkill\w*|out of memory|crash\w*|fail\w*|errors?|broken|stuck|timeouts?|restarts?)\b",
    re.I,
)
_NAMED = re.compile(r"\d|[A-Z]")  # a value that names something: a version, a number, a product's capitals


def _setup_fact(sentence: str, *, marked: bool) -> ExtractedFact | None:
    """The fact of one stated sentence about the user's setup, without a first person (see the module
    docstring), or ``None``; ``marked``: the sentence follows a marker like "setup:" or "context:"."""
    sentence = _HEDGE.sub("", sentence)
    if _NOT_STATED.search(sentence):
        return None
    if (match := _SETUP_USES.match(sentence) or _LEADING_THING.match(sentence)) is not None:
        value = _clause(sentence[match.end() :])
        if value and _NAMED.search(value) and value.lower().split()[0] not in STOPWORDS:
            subject = match.groupdict().get("subject")
            said = _as_written(sentence[match.end() :], value)
            text = f"the user's {_owned(subject)} uses {said}" if subject else f"the user uses {said}"
            return ExtractedFact("user", thing_key(value), value, text)
        return None
    if (match := _DEPLOYED.match(sentence) or _SETUP_IS.match(sentence) or _NAMED_IS.match(sentence)) is not None:
        subject, verb = _owned(match.group("subject")), match.group("verb").lower()
        value = _clause(sentence[match.end() :])
        possessed = match.group("subject").lower().startswith(("our ", "my "))
        if value and (possessed or _NAMED.search(value)) and value.lower().split()[0] not in STOPWORDS:
            attribute = subject.lower() if verb in ("is", "are") else f"{subject.lower()} {verb}"
            said = _as_written(sentence[match.end() :], value)
            return ExtractedFact("user", attribute, value, f"the user's {subject} {verb} {said}")
        return None
    if not marked or _FIRST_PERSON_WORD.search(sentence):
        return None
    if (match := _THIS_IS.match(sentence)) is not None:  # "this is docker swarm"
        value = _clause(sentence[match.end() :])
        return ExtractedFact("user", "setup", value, f"the user's setup is {value}") if value else None
    value = _clause(sentence)  # "setup: Loki 3.x in microservices mode": the thing itself
    if value and _NAMED.search(value) and value.lower().split()[0] not in STOPWORDS:
        return ExtractedFact("user", f"setup {value.split()[0].lower()}", value, f"the user's setup: {value}")
    return None


_FIRST_PERSON_WORD = re.compile(r"\b(?:i|i'm|i've|we|we're|we've|us)\b", re.I)
_OWNER = re.compile(r"^(?:the|our|my|this|these|all the|all our|all my|all)\s+", re.I)


def _owned(subject: str) -> str:
    """A setup subject without its determiner, as written ("our NLB" -> "NLB"; "everything" -> "setup")."""
    owned = _OWNER.sub("", subject.strip())
    return "setup" if owned.lower() in ("everything", "it", "all", "this") else owned


def setup_facts(user_words: str) -> list[ExtractedFact]:
    """Facts of the sentences that state the user's setup without a first person, in order."""
    found = []
    for sentence in _SENTENCE.split(user_words):
        sentence = _DISCOURSE_LEAD.sub("", sentence.strip())
        marker = _MARKED.match(sentence)
        # under a marker, each comma-separated part is a statement ("context: small team, 10GB a day, ...")
        parts = re.split(r",\s+", sentence[marker.end() :]) if marker else [sentence]
        for part in parts:
            if part and not _FIRST_PERSON_WORD.match(part):
                fact = _setup_fact(part, marked=marker is not None)
                if fact is not None:
                    found.append(fact)
    return found


def _changes(user_words: str) -> list[ExtractedFact]:
    """Facts of the changes the user states: switched from one thing to another, stopped using one, upgraded a
    named thing to a version."""
    found = []
    for match in _SWITCHED.finditer(user_words):
        old, new = _clause(match.group("old")), _clause(match.group("new"))
        if old and new and old.lower().split()[0] not in STOPWORDS:
            found += [stopped(old, f"the user switched from {old} to {new}"), used(new)]
    for match in [*_STOPPED.finditer(user_words), *_NO_MORE.finditer(user_words)]:
        old = _clause(match.group("old"))
        if old and old.lower().split()[0] not in STOPWORDS:
            found.append(stopped(old))
    for match in _CHANGED_THING.finditer(user_words):
        thing = _LEADING_ARTICLE.sub("", match.group("thing"))
        if thing and thing.lower().split()[0] not in STOPWORDS:
            found.append(used(f"{thing} {match.group('version')}"))
    return found


def extract_facts(user_words: str) -> list[ExtractedFact]:
    """The facts stated in the user's own words, in order (one per attribute key; a stated change first)."""
    found: dict[tuple[str, str], ExtractedFact] = {}
    for fact in _changes(user_words):
        found.setdefault((fact.subject, fact.attribute), fact)
    stated_stop = {a for (_, a), f in found.items() if f.value.startswith(NO_LONGER)}
    for pattern, verb, many in _VERB_FACTS:
        for match in pattern.finditer(user_words):
            value = _clause(user_words[match.end() :])
            if not value or value.lower().split()[0] in STOPWORDS or _ASKED.search(user_words[: match.start()]):
                continue
            key = (thing_key(value) if verb in _FAMILY else f"{verb} {value.split()[0].lower()}") if many else verb
            if key in stated_stop:
                continue
            said = _as_written(user_words[match.end() :], value)
            found.setdefault(("user", key), ExtractedFact("user", key, value, f"the user {verb} {said}"))
    for fact in setup_facts(user_words):
        found.setdefault((fact.subject, fact.attribute), fact)
    for match in _MY_FACT.finditer(user_words):
        attribute = match.group(1).lower()
        value = _clause(user_words[match.end() :])
        text = f"the user's {attribute} {match.group(2).lower()} {_as_written(user_words[match.end() :], value)}"
        said = {f.text.lower() for f in found.values()}  # "our DNS is hosted on X" read by the setup rules already
        if value and attribute.split()[0] not in STOPWORDS and text.lower() not in said:
            found.setdefault(("user", attribute), ExtractedFact("user", attribute, value, text))
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
