"""Sphinx's reStructuredText, as docutils can read it: the directives and roles of Sphinx and its extensions
(``code-block``, ``versionadded``, ``toctree``, ``:ref:``, ``:setting:``, any project's own) turned into plain
docutils nodes, so that what a reader of the built page reads stays and the markup goes.

docutils knows none of them: an unknown directive or role is an error whose node quotes the raw markup. Here every
directive and role a page uses that docutils does not render itself gets a tolerant stand-in: its content is
unwrapped (parsed as ordinary body text), its argument kept as a label where Sphinx shows it, any option accepted.
What Sphinx builds from elsewhere (``toctree``, ``literalinclude``, ``include``, autodoc) is left out, as the
Markdown reader leaves out transclusion: the included file is in the tree and is ingested on its own, and reading
files a page names could lead outside the ingested folder.

docutils looks directives and roles up in module-level registries. :func:`sphinx_namespace` registers the stand-ins
for the names one page uses and restores the registries afterwards (as Sphinx's own ``docutils_namespace`` does),
under a lock, so another user of docutils in the process never sees them.
"""

from __future__ import annotations

import ast
import re
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from docutils import nodes, utils
from docutils.parsers.rst import Directive, directives, roles

# docutils' own directives, rendered by docutils (admonitions, tables, figures, ...): everything else is Sphinx's
DOCUTILS_DIRECTIVES = frozenset(
    {
        *("attention", "caution", "danger", "error", "hint", "important", "note", "tip", "warning", "admonition"),
        *("topic", "sidebar", "rubric", "epigraph", "highlights", "pull-quote", "compound", "container"),
        *("table", "csv-table", "list-table", "line-block", "parsed-literal", "math", "image", "figure"),
        *("replace", "unicode", "date", "class", "role", "default-role", "title", "contents", "sectnum"),
    }
)
# docutils' own roles (emphasis, literals, PEP and RFC references, abbreviations): every other role is Sphinx's
DOCUTILS_ROLES = frozenset(
    {
        *("emphasis", "strong", "literal", "code", "math", "pep", "pep-reference", "rfc", "rfc-reference"),
        *("sub", "subscript", "sup", "superscript", "abbr", "abbreviation", "acronym", "title", "t"),
        "title-reference",
    }
)
# directives whose output comes from elsewhere (other files, the code, the build): nothing of them is indexed
HIDDEN = frozenset(
    {
        *("toctree", "literalinclude", "include", "index", "highlight", "currentmodule", "module", "click"),
        *("autosummary", "tabularcolumns", "sectionauthor", "moduleauthor", "codeauthor", "default-domain"),
        *("raw", "meta", "spelling:word-list", "testsetup", "testcleanup", "graphviz", "digraph", "mermaid"),
        *("uml", "plantuml", "inheritance-diagram", "only-latex"),
    }
)
CODE = frozenset({"code-block", "code", "sourcecode", "doctest", "testcode", "testoutput", "ipython", "prompt"})
VERSION_NOTES = {
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
# directives whose argument is a condition or a name, not a title a reader sees (their content is kept)
UNTITLED = frozenset({"only", "ifconfig", "hlist", "glossary", "seealso", "centered", "todo", "tabs", "grid"})
# roles Sphinx renders in monospace (cross-references to code objects, options, settings, files): a code span here
LITERAL_ROLES = frozenset(
    {
        *("setting", "option", "envvar", "class", "func", "meth", "mod", "attr", "exc", "const", "data", "obj"),
        *("file", "command", "program", "kbd", "samp", "makevar", "mailheader", "sig", "signal", "control"),
        *("event", "state", "keyword", "type", "member", "macro", "var", "enum", "struct", "confval", "directive"),
        "role",
    }
)
ISSUE_ROLES = {"github_issue": "#", "github_pr": "#", "issue": "#", "pr": "#", "github_user": "@"}

_ROLE_USE = re.compile(r"(?<![\w`]):((?:[A-Za-z0-9]+[-._+:])*[A-Za-z0-9]+):`")
_DIRECTIVE_USE = re.compile(r"^[ \t]*\.\.[ \t]+((?:[A-Za-z0-9]+[-._+:])*[A-Za-z0-9]+)[ \t]?::(?:[ \t]|$)", re.MULTILINE)
_EXPLICIT_TITLE = re.compile(r"^(.+?)\s*<([^<>]*)>$", re.DOTALL)


class _AnyOption(dict):
    """An option spec that accepts every option (``:caption:``, ``:emphasize-lines:``, ``:maxdepth:``...)."""

    def __missing__(self, key: str):
        return directives.unchanged

    def __bool__(self) -> bool:
        return True


class _SphinxDirective(Directive):
    """Accepts what any directive may be given: one argument line, any options, content."""

    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = _AnyOption()
    has_content = True

    def _body(self) -> list[nodes.Node]:
        holder = nodes.container()
        self.state.nested_parse(self.content, self.content_offset, holder)
        return holder.children


class Hidden(_SphinxDirective):
    def run(self) -> list[nodes.Node]:
        return []


class Code(_SphinxDirective):
    """``code-block`` with Sphinx's options: the language kept, a ``:caption:`` as the label before the code."""

    def run(self) -> list[nodes.Node]:
        text = "\n".join(self.content)
        language = self.arguments[0].strip() if self.arguments else ""
        if self.name == "doctest":
            language = language or "pycon"
        block = nodes.literal_block(text, text, language=language)
        caption = str(self.options.get("caption") or "").strip()
        if not caption:
            return [block]
        inline, _ = self.state.inline_text(caption, self.lineno)  # ``flaskr/__init__.py`` is a literal, as in prose
        return [nodes.rubric(caption, "", *inline), block]


class VersionNote(_SphinxDirective):
    """``versionadded:: 5.6 text``: "New in version 5.6: text", as Sphinx renders it (often the only date of a
    fact)."""

    def run(self) -> list[nodes.Node]:
        version, _, rest = (self.arguments[0] if self.arguments else "").strip().partition(" ")
        lead = f"{VERSION_NOTES[self.name]} {version}".strip()
        body = self._body()
        if rest.strip():
            inline, _ = self.state.inline_text(rest.strip(), self.lineno)
            body.insert(0, nodes.paragraph("", "", *inline))
        if body and isinstance(body[0], nodes.paragraph):
            body[0].insert(0, nodes.Text(f"{lead}: "))
        else:
            body.insert(0, nodes.paragraph("", f"{lead}."))
        return body


class Unwrapped(_SphinxDirective):
    """Any other directive: its content as body text, after its argument as a label when it has content (a tab's
    title, an object's signature); with no content it renders nothing a reader reads (``.. setting:: name``). A
    project's own code directive (Click's ``click:example``, ``click:run``) is read by its content: content that is
    Python with code in it, or a shell session, stays code."""

    def run(self) -> list[nodes.Node]:
        language = code_language("\n".join(self.content))
        if language and not self.arguments:
            text = textwrap.dedent("\n".join(self.content)).strip("\n")
            return [nodes.literal_block(text, text, language=language)]
        body = self._body()
        title = self.arguments[0].strip() if self.arguments else ""
        if title and body and self.name.split(":")[-1] not in UNTITLED and not self.name.startswith("auto"):
            return [nodes.rubric(title, title), *body]
        if self.name == "centered" and title:
            return [nodes.paragraph(title, title)]
        return body


# statements that make a text code: a bare name or value also parses as Python, and prose never does
_CODE_NODES = (ast.Call, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_CODE_NODES += (ast.Import, ast.ImportFrom, ast.With, ast.For, ast.If, ast.Return, ast.Attribute, ast.Subscript)


def code_language(text: str) -> str | None:
    """ "python" when ``text`` parses as Python with code in it (a call, an assignment, a definition, an import),
    "console" when every line is a shell prompt's or what follows one; else ``None`` (prose, or a bare word)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith("$ "):
        return "console"
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return None
    return "python" if any(isinstance(node, _CODE_NODES) for node in ast.walk(tree)) else None


def _directive_for(name: str) -> type[Directive]:
    base = name.split(":")[-1]
    if name in HIDDEN or base in HIDDEN:
        return Hidden
    if base in CODE:
        return Code
    if base in VERSION_NOTES:
        return VersionNote
    return Unwrapped


def role_text(name: str, text: str) -> str:
    """What Sphinx shows for a role: its explicit title (``title <target>``), else the target shortened as Sphinx
    does (``~a.b.C`` -> ``C``; ``!`` and Celery's ``@`` shortcut dropped); a label or document name as words."""
    explicit = _EXPLICIT_TITLE.match(text)
    if explicit:
        return explicit[1].strip()
    target = text.strip().lstrip("!")
    if target.startswith("~"):
        target = target[1:].lstrip("@").rsplit(".", 1)[-1]
    target = target.lstrip("@")
    if name in ("ref", "doc", "numref", "term", "download"):
        target = re.sub(r"[-_]+", " ", target.rsplit("/", 1)[-1]) if name != "term" else target
    if name == "menuselection":
        target = target.replace("-->", ">")
    return ISSUE_ROLES.get(name, "") + target


_STRAY_ROLE = re.compile(r"(?<![\w`]):((?:[A-Za-z0-9]+[-._+:])*[A-Za-z0-9]+):`([^`]*)`")


def stray_roles(text: str) -> str:
    """Text with role markup that docutils left as text (inside emphasis, where inline markup does not nest)
    replaced by what the role shows."""
    if ":`" not in text:
        return text
    return _STRAY_ROLE.sub(lambda m: role_text(m[1].lower().split(":")[-1], m[2]), text)


def _role(name: str, rawtext: str, text: str, lineno: int, inliner, options=None, content=None):
    """A stand-in for every role docutils does not know: a code span for code objects, plain text otherwise."""
    base = name.lower().split(":")[-1]
    shown = role_text(base, utils.unescape(text))
    if base in LITERAL_ROLES:
        return [nodes.literal(rawtext, shown)], []
    if base in ("ref", "doc", "numref") and not _EXPLICIT_TITLE.match(text):
        return [nodes.inline(rawtext, shown, reflabel=text.strip())], []  # the title of the section it names
    return [nodes.Text(shown)], []


_LOCK = threading.Lock()


@contextmanager
def sphinx_namespace(text: str) -> Iterator[None]:
    """docutils' registries with a stand-in for each Sphinx directive and role ``text`` uses, restored on exit."""
    with _LOCK:
        saved_directives, saved_roles = dict(directives._directives), dict(roles._roles)
        try:
            for name in {m.lower() for m in _DIRECTIVE_USE.findall(text)} - DOCUTILS_DIRECTIVES:
                directives.register_directive(name, _directive_for(name))
            for name in {m.lower() for m in _ROLE_USE.findall(text)} - DOCUTILS_ROLES:
                roles.register_local_role(name, _role)
            yield
        finally:
            directives._directives.clear()
            directives._directives.update(saved_directives)
            roles._roles.clear()
            roles._roles.update(saved_roles)
