"""The names the answers said, and what kind of thing each names, for "which settings did you mention?".

A name's kind is read from how the answers use it, not from a list of names: a setting is set (a key assigned in a
code block, a flag, an upper-case environment variable), code is called, defined or decorated, a file is a path.
A name the prose mentions is kept for any request but a request for files (the prose does not show its kind:
"Register `close_db` with `app.teardown_appcontext`"); a name only a code block says is kept when the block shows
it to be of the kind asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_CODE_SPAN = re.compile(r"`[^`\n]+`")
# an identifier as written: a code span without spaces, or a word with an inner _ . - or capital, or a flag
_IDENTIFIER = re.compile(r"(?<![\w`/.-])(--?[A-Za-z][\w-]*|[A-Za-z][\w]*(?:[._-][\w]+)+|[a-z]+[A-Z]\w*)(?![\w`/])")


def identifiers(text: str) -> list[str]:
    """The names a unit says: its code spans that are one word (not a command, a URL or a number), then its words
    that read as identifiers (``worker_concurrency``, ``--concurrency``, ``celery.contrib.pytest``; not a hyphenated
    English word of the prose, "per-tenant", nor an abbreviation, "i.e.")."""
    spans = [s for s in _CODE_SPAN.findall(text) if " " not in s.strip("`")]
    # a name said with its value is the name: `python_requires=">=3.9"`, `--autoscale=10,3`
    names = [s.strip("`").split("=", 1)[0] for s in spans if "://" not in s]
    plain = _CODE_SPAN.sub(" ", text)
    found = (m.group(1).rstrip(".") for m in _IDENTIFIER.finditer(plain))
    names += [n for n in found if "://" not in n and not _COMPOUND.fullmatch(n) and not _ABBREVIATION.fullmatch(n)]
    return [n for n in names if is_name(n)]


def is_name(text: str) -> bool:
    """A name, not a value or a symbol: a letter in it, not a number, a boolean or a quoted string ("'.html'")."""
    if not any(c.isalpha() for c in text) or text[:1] in "'\"" or text.replace(".", "").isdigit():
        return False
    return not _VALUE.fullmatch(text)


# an English compound in prose ("per-tenant", "out-of-memory", "Back-off" opening a sentence), not a name: in code it
# would be in a code span ("X-Scope-OrgID", with capitals inside, is a name)
_COMPOUND = re.compile(r"[A-Za-z][A-Za-z]*(?:-[a-z]+)+")  # "IO-bound" too


# an abbreviation in prose, letters and dots ("i.e.", "e.g.", "a.k.a."), not a name
_ABBREVIATION = re.compile(r"[A-Za-z](?:\.[A-Za-z])+")


# a value, not a name: a boolean, a version, a number with a unit
_VALUE = re.compile(r"(?i)true|false|null|none|yes|no|on|off|v?\d+(\.\d+)*[a-z]{0,3}")

# a file by its extension: source, configuration, data, docs and scripts
_FILE = re.compile(r"\.(py|pyi|js|mjs|ts|tsx|go|rs|rb|java|toml|ya?ml|json|ini|cfg|conf|env|md|rst|txt|sh|lock)$")


# a class's name: capitalised, lower case after its first letter ("Repo", "CliRunner", "click.CommandCollection")
_CLASS = re.compile(r"(?:\w+\.)*[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)*")


def name_kind(name: str, prose: str, code: str) -> str | None:
    """What ``name`` names, by how the answers' ``prose`` and ``code`` use it: "file", "class" (by its shape:
    capitalised, "CliRunner"), "code", "setting", or ``None`` when they do not show it."""
    if "/" in name or _FILE.search(name):
        return "file"
    if _CLASS.fullmatch(name.removesuffix("()")):
        return "class"
    bare = _bare(name)
    used = f"{prose}\n{code}"
    if (
        name.endswith(")")
        or name.startswith("@")
        or re.search(rf"(?<![\w-])({bare}\(|(def|class) {bare}\b|@{bare})", used)
    ):
        return "code"
    if name.startswith("-") or (name.isupper() and "_" in name) or re.search(rf"(?<![\w-]){bare}['\"]?\s*[:=]", code):
        return "setting"
    return None


def is_type_or_defined(name: str, code: str) -> bool:
    """``name`` is a class's, or the answers' code defines it, decorates with it or calls it as a method
    (``env.get_template(...)``): no setting, whatever else (a bare call, ``change_in('/web')`` in a pipeline
    file, may be an option's)."""
    bare = _bare(name)
    called_on = re.search(rf"\.{bare}\(", code) or ("." in name and re.search(rf"{bare}\(", code))
    return bool(_CLASS.fullmatch(name) or re.search(rf"(def|class) {bare}\b|@{bare}\b", code) or called_on)


def _bare(name: str) -> str:
    """``name`` as a pattern, without a decorator's ``@`` or a call's ``()``."""
    return re.escape(name.removeprefix("@").removesuffix("()"))


def of_kind(found: Iterable[tuple[str, bool]], kind: str | None, prose: str, code: str) -> list[str]:
    """The names of ``found`` (each with whether a code block said it) that can be of ``kind``. A name only a code
    block said is part of that code, kept only when the code shows it to be of ``kind``. A name the prose said was
    mentioned: kept unless it is a file (and a file was not asked for), a class or defined function asked for as a
    setting, or a flag or set key asked for as code; users call a config file's function an "option". Every name
    when ``kind`` is ``None`` or none would be left."""
    found = list(found)
    if kind is None:
        return [name for name, _ in found]

    def fits(name: str, in_code: bool) -> bool:
        its = name_kind(name, prose, code)
        if kind == "file" or its == "file":
            return its == kind
        if kind == "class" or in_code or its == kind:  # a class by its shape, wherever it was said
            return its == kind
        # mentioned in prose: "options" may be a config file's functions, never a class or a function defined;
        # "functions" are never a flag or a key the code sets, nor a class (named by its shape)
        return not is_type_or_defined(name, code) if kind == "setting" else its not in ("setting", "class")

    return [name for name, in_code in found if fits(name, in_code)] or [name for name, _ in found]
